"""A study killed midway (SIGKILL, on Ray) and resumed ends with the uninterrupted study's
pairings, without asking a model or judge again for an output its receipts hold."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from margin.studies.plan import plan_study
from margin.studies.runner import run_study
from tests.support.paths import REPO
from tests.support.study import study_config, toy_server, write_config

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def study(*args: str) -> list[str]:
    return [sys.executable, "-m", "margin", "study", *args, "--no-cache"]


def wait_for_no_study_actors(timeout_s: float = 60.0) -> None:
    import ray

    deadline = time.monotonic() + timeout_s
    while any(a["name"].startswith(("margin-model-", "margin-guard-"))
              for a in ray.util.list_named_actors(all_namespaces=True)):
        assert time.monotonic() < deadline, "model actors outlived their killed driver"
        time.sleep(0.2)


def test_a_sigkilled_study_resumes_to_the_same_pairings(tmp_path, ray_address):
    log: list[tuple[str, str]] = []
    with toy_server(delay_s=0.03, log=log) as url:
        config = study_config(url, models=["toy-medium", "toy-large"],
                              transformations=[("zero-width-space", "100%"), ("homoglyph", "100%")])
        for model in [*config["models"], config["judge"]["model"]]:
            model.update({"max_batch_size": 4, "backend_options": {"max_concurrency": 2, "max_attempts": 1}})
        path = write_config(tmp_path, config)
        reference = run_study(plan_study(path), tmp_path / "ref", engine="local", cache=False)
        asked = len(log)

        out = tmp_path / "killed"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        # The killed study is told the cluster with --ray-address, the resumed one finds it in $RAY_ADDRESS.
        proc = subprocess.Popen(study(str(path), "--out", str(out), "--ray-address", ray_address), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        while len(lines(out / "calls.jsonl")) < 25:
            assert proc.poll() is None, f"the study ended before the kill point: {proc.stderr.read()}"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        wait_for_no_study_actors()
        before = len(lines(out / "calls.jsonl"))
        assert not (out / "pairings.json").exists()

        done = subprocess.run(study(str(path), "--out", str(out), "--resume"), env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr

    resumed = json.loads((out / "pairings.json").read_text())
    assert resumed["data"] == reference.pairings["data"]
    assert {k: v for k, v in resumed["meta"].items() if k != "snapshot_date"} == \
        {k: v for k, v in reference.pairings["meta"].items() if k != "snapshot_date"}
    assert (out / "cases.jsonl").read_bytes() == (tmp_path / "ref" / "cases.jsonl").read_bytes()

    records = lines(out / "calls.jsonl")
    completed = [r["key"] for r in records if r["output"] is not None and not r["cached"]]
    assert len(completed) == len(set(completed)), "an output was asked for again after it was recorded"
    assert len(records) > before
    # The killed and the resumed study together asked the server at most what the reference
    # asked, plus the calls in flight at the kill (2 per actor, 4 requests each, 3 pools).
    total = len(log) - asked
    assert asked <= total <= asked + 3 * 2 * 4
    counts = Counter(log[asked:])
    assert set(counts) == set(log[:asked])
