"""`margin run --search adaptive --one-edit all`: every cost certified among one-edit flips."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import margin


def lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow  # a certified run asks every single edit of its certified set (15 s here, load average 6)
def test_one_edit_all_certifies_every_cost_and_is_recorded(tmp_path):
    guided, every = tmp_path / "guided", tmp_path / "all"
    common = ["run", "--guard", "keyword", "--search", "adaptive", "--engine", "local", "--no-cache"]
    assert margin(*common, "--out", str(guided)).returncode == 0
    proc = margin(*common, "--one-edit", "all", "--out", str(every))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((every / "run.json").read_text())["one_edit"] == "all"
    assert "space-in-word" in json.loads((every / "run.json").read_text())["one_edit_set"]["transforms"]
    assert "one_edit_set" not in json.loads((guided / "run.json").read_text())
    assert "one_edit" not in json.loads((guided / "run.json").read_text())  # the default, as before the flag
    before = {r["prompt_id"]: r for r in lines(guided / "results.jsonl")}
    right = [r for r in lines(every / "results.jsonl") if r["flip_cost"] not in (0, None)]
    assert right and all(r["tags"]["one_edit"] == "minimal" for r in right)
    assert any(before[r["prompt_id"]]["tags"]["one_edit"] == "upper-bound" for r in right)
    assert all(r["flip_cost"] <= before[r["prompt_id"]]["flip_cost"] + 1e-9 for r in right)
    # the receipts account for every call, the certification's included
    calls = [r for r in lines(every / "receipts.jsonl") if r["kind"] == "call"]
    assert len(calls) == sum(r["guard_calls"] for r in lines(every / "results.jsonl"))
    # a resume with another mode is refused, naming the flag
    proc = margin(*common, "--resume", str(every))
    assert proc.returncode == 2 and "--one-edit" in proc.stderr, proc.stderr


def test_one_edit_is_checked_and_refused_elsewhere(tmp_path):
    for args, says in ((["--search", "adaptive", "--one-edit", "some"], "--one-edit"),
                       (["--one-edit", "all"], "only --search adaptive takes --one-edit")):
        proc = margin("run", "--guard", "keyword", "--engine", "local", *args, "--out", str(tmp_path / "x"))
        assert proc.returncode == 2 and says in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        assert not (tmp_path / "x").exists()


def test_margin_score_replays_a_certified_run_with_its_options(tmp_path):
    run, out = tmp_path / "ada", tmp_path / "rescored"
    proc = margin("run", "--guard", "keyword", "--search", "adaptive", "--one-edit", "all", "--max-calls", "12",
                  "--engine", "local", "--no-cache", "--limit", "8", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    proc = margin("score", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "results.jsonl").read_bytes() == (run / "results.jsonl").read_bytes()
    assert json.loads((out / "run.json").read_text())["one_edit"] == "all"


@pytest.mark.slow  # two adaptive runs as subprocesses (about 5 s)
def test_one_edit_none_is_recorded_and_on_a_guard_without_scores_changes_nothing(tmp_path):
    common = ["run", "--guard", "keyword", "--search", "adaptive", "--engine", "local", "--no-cache", "--limit", "12"]
    assert margin(*common, "--out", str(tmp_path / "guided")).returncode == 0
    proc = margin(*common, "--one-edit", "none", "--out", str(tmp_path / "none"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "none" / "run.json").read_text())["one_edit"] == "none"
    # keyword reports no p_unsafe, so nothing is swept or stacked in either mode: call for call the same
    assert (tmp_path / "none" / "results.jsonl").read_bytes() == (tmp_path / "guided" / "results.jsonl").read_bytes()
