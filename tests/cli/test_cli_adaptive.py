"""`margin run --search adaptive`: labelled records, call budgets, seeding from a standard run."""

from __future__ import annotations

import json

import pytest

from margin.reports.protocols import ADAPTIVE_PROTOCOL, STANDARD_PROTOCOL
from margin.search.edits import rebuild_text
from tests.support.cli import margin
from tests.support.shared_runs import keyword_quick_cli_run

pytestmark = pytest.mark.usefixtures("ray_address")  # join the session's Ray, not one per run


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_adaptive_run_is_labelled_budgeted_and_seedable(tmp_path):
    std, ada = tmp_path / "std", tmp_path / "ada"
    proc = margin("run", "--guard", "keyword", "--out", str(std))
    assert proc.returncode == 0, proc.stderr
    proc = margin("run", "--guard", "keyword", "--search", "adaptive", "--max-calls", "12",
                  "--incumbents", str(std), "--out", str(ada))
    assert proc.returncode == 0, proc.stderr
    assert "ADAPTIVE" in proc.stdout
    manifest = json.loads((ada / "run.json").read_text())
    assert manifest["protocol"] == ADAPTIVE_PROTOCOL and manifest["search"] == "adaptive"
    assert manifest["max_calls"] == 12 and manifest["incumbents"] == str(std)
    assert json.loads((std / "run.json").read_text())["protocol"] == STANDARD_PROTOCOL
    snapshot = json.loads((ada / "snapshot.json").read_text())
    assert snapshot["meta"]["protocol"] == ADAPTIVE_PROTOCOL
    evaluation = snapshot["data"][0]["evaluation"]
    assert evaluation["search"] == "adaptive" and evaluation["upper_bound"] is True
    assert any("upper bound" in c for c in evaluation["caveats"])

    standard = {r["prompt_id"]: r for r in lines(std / "results.jsonl")}
    adaptive = lines(ada / "results.jsonl")
    assert all(1 <= r["guard_calls"] <= 12 for r in adaptive)
    assert all(r["flip_cost"] <= standard[r["prompt_id"]]["flip_cost"] + 1e-9 for r in adaptive)
    assert sum(r["flip_cost"] for r in adaptive) < sum(r["flip_cost"] for r in standard.values())
    receipts = [r for r in lines(ada / "receipts.jsonl") if r["kind"] == "call"]
    per_prompt = {}
    for r in receipts:
        per_prompt[r["prompt_id"]] = per_prompt.get(r["prompt_id"], 0) + 1
    assert all(per_prompt[r["prompt_id"]] == r["guard_calls"] for r in adaptive)


def test_adaptive_flips_rebuild_from_their_records(tmp_path):
    out = tmp_path / "a"
    proc = margin("run", "--guard", "keyword", "--search", "adaptive", "--seed", "3", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    from margin.datasets import load_dataset

    texts = {p.id: p.text for p in load_dataset("sample").prompts}
    flips = [r for r in lines(out / "results.jsonl") if r["flip"]]
    assert flips
    for r in flips:
        f = r["flip"]
        assert rebuild_text(texts[r["prompt_id"]], f["transform"], f["strength"], f["seed"]) == f["text"]


def test_adaptive_options_are_refused_elsewhere_and_checked(tmp_path):
    for args, field in ((["--max-calls", "5"], "--search"), (["--search", "adaptive", "--max-calls", "1"], "--max-calls"),
                        (["--search", "adaptive", "--incumbents", str(tmp_path / "none")], "run.json"),
                        (["--search", "bon", "--incumbents", str(tmp_path)], "only --search adaptive takes --incumbents")):
        proc = margin("run", "--guard", "keyword", *args, "--out", str(tmp_path / "x"))
        assert proc.returncode == 2 and field in proc.stderr, proc.stderr
        assert not (tmp_path / "x").exists()


def test_incumbents_from_another_dataset_are_refused(tmp_path, tmp_path_factory, xstest_csv, ray_address):
    std = keyword_quick_cli_run(tmp_path_factory, ray_address)  # a standard run of the sample
    proc = margin("run", "--guard", "keyword", "--dataset", str(xstest_csv), "--search", "adaptive",
                  "--incumbents", str(std), "--out", str(tmp_path / "x"))
    assert proc.returncode == 2 and "dataset.sha256" in proc.stderr
