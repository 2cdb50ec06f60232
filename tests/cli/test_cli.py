from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import margin
from tests.support.shared_runs import keyword_quick_cli_run

# `margin run` subprocesses join the session's Ray instead of each starting one.
pytestmark = pytest.mark.usefixtures("ray_address")

GUARD_FILE = '''
class Mine:
    def classify(self, texts):
        return ["unsafe" if "bomb" in t else ("safe" if len(t) % 7 else 42) for t in texts]
'''


@pytest.fixture
def keyword_run(tmp_path_factory, ray_cluster) -> Path:
    """`margin run --guard keyword --suite quick`, which tests here and elsewhere only read."""
    return keyword_quick_cli_run(tmp_path_factory, ray_cluster)


def test_run_writes_every_record(keyword_run):
    out = keyword_run
    assert {p.name for p in out.iterdir()} >= {"receipts.jsonl", "results.jsonl", "snapshot.json", "curves.png"}
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 48
    assert set(results[0]) >= {"prompt_id", "label", "type", "clean_verdict", "flip_cost", "capped", "flip", "guard_calls"}
    snapshot = json.loads((out / "snapshot.json").read_text())
    record = snapshot["data"][0]
    assert record["id"] == "keyword" and record["rank"] == 1
    assert set(snapshot["meta"]["provenance"]) >= {"margin_version", "git_commit", "dataset", "suite", "budget", "cost_norm"}
    assert set(record["evaluation"]) >= {"checkpoint", "revision", "backend", "template", "threshold", "caveats"}
    receipts = [json.loads(line) for line in (out / "receipts.jsonl").read_text().splitlines()]
    calls = [r for r in receipts if r["kind"] == "call"]
    assert sum(r["guard_calls"] for r in results) == len(calls)
    assert set(calls[0]) >= {"run_id", "guard_id", "prompt_id", "transform", "strength", "seed", "cost",
                             "text_sha256", "verdict", "p_unsafe", "raw", "latency_s", "attempt", "error"}


def test_same_seed_gives_byte_identical_outputs(keyword_run, tmp_path):
    outs = [keyword_run, tmp_path / "b"]  # two runs, each its own margin process
    assert margin("run", "--guard", "keyword", "--suite", "quick", "--out", str(outs[1])).returncode == 0
    a, b = ((o / "results.jsonl").read_bytes() for o in outs)
    assert a == b
    snaps = [json.loads((o / "snapshot.json").read_text()) for o in outs]
    for s in snaps:
        s["meta"].pop("snapshot_date")
    assert snaps[0] == snaps[1]
    raw = [(o / "snapshot.json").read_text() for o in outs]
    assert raw[0] == raw[1]  # same day: fully identical bytes


def test_user_python_guard(tmp_path):
    guard = tmp_path / "mine.py"
    guard.write_text(GUARD_FILE)
    out = tmp_path / "run"
    proc = margin("run", "--guard", f"python:{guard}:Mine", "--suite", "quick", "--limit", "6", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    verdicts = {json.loads(line)["verdict"] for line in (out / "receipts.jsonl").read_text().splitlines()
                if '"kind": "call"' in line}
    assert "invalid" in verdicts  # 42 is neither safe nor unsafe


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--dataset", "MISSING.csv"], "MISSING.csv"),
        (["--guard", "keywrd"], "did you mean keyword"),
        (["--budget", "0"], "--budget"),
        (["--search", "fastest"], "--search"),
        (["--suite", "standrd"], "did you mean standard"),
        (["--guard", "python:nofile.py:X"], "nofile.py"),
        (["--drivers", "0"], "--drivers"),
        (["--drivers", "2", "--engine", "local"], "--engine ray"),
        (["--drivers", "2", "--shard", "1/2"], "not both"),
        (["--engine", "local", "--call-timeout", "5"], "--call-timeout"),  # in-process: cannot be honoured
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, args, message):
    out = tmp_path / "never"
    base = {"--guard": "keyword"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    flat = [x for kv in base.items() for x in kv]
    proc = margin("run", *flat, "--out", str(out))
    assert proc.returncode == 2
    assert message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_bad_dataset_line_exits_2(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("id,prompt,label\n1,hi,safe\n2,yo,dangerous\n")
    proc = margin("run", "--guard", "keyword", "--dataset", str(data), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and f"{data}:3" in proc.stderr and "unknown label" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_transforms_apply_json_and_visible():
    proc = margin("transforms", "apply", "zero-width-space", "poison", "--strength", "1", "--json")
    payload = json.loads(proc.stdout)
    assert payload["text"].replace("\u200b", "") == "poison"
    assert payload["cost"] == pytest.approx(100 / 6)
    shown = margin("transforms", "apply", "zero-width-space", "poison", "--strength", "1").stdout
    assert "<U+200B>" in shown


def test_transforms_and_guards_list_json():
    names = {t["name"] for t in json.loads(margin("transforms", "list", "--json").stdout)}
    assert {"homoglyph", "zero-width-space", "fullwidth", "leetspeak", "neighbour-swap", "roleplay"} <= names
    guards = json.loads(margin("guards", "list", "--json").stdout)
    assert any(g["name"] == "keyword" for g in guards)


def test_cli_does_not_import_heavy_frameworks():
    code = ("import sys, margin, margin.cli, margin.runs.executing.execute; "
            "print([m for m in ('torch', 'transformers', 'vllm') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_resume_command_repeats_the_invocation_with_its_folder():
    from margin.cli.common import resume_command

    argv = ["run", "--guard", "llama-guard-4", "--base-url", "http://h:8000/v1", "--out", "runs/a b", "--limit", "5"]
    assert resume_command("run", Path("runs/a b"), argv) == (
        "margin run --guard llama-guard-4 --base-url http://h:8000/v1 --limit 5 --resume 'runs/a b'")
    again = ["run", "--guard", "g", "--resume=runs/x"]
    assert resume_command("run", Path("runs/x"), again) == "margin run --guard g --resume runs/x"
    study = ["study", "s.yaml", "--out", "runs/s", "--resume", "--engine", "local"]
    assert resume_command("study", Path("runs/s"), study) == "margin study s.yaml --engine local --out runs/s --resume"
