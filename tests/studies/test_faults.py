"""Faults the way they happen: a proxy on 127.0.0.1 in front of real servers fails the first
attempt at a fifth of the requests with 500 / 503, hangs a tenth, answers garbage to 5% and
drops 3% of the connections. `margin run` (default options, and a short `--call-timeout`)
and a paired study through it lose nothing and end exactly as the clean runs do.

The hangs here are short (CI); benchmarks/faults.py measures the full-size mix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from benchmarks.fault_proxy import FaultMix, FaultProxy, Outage
from benchmarks.http_guard import start_server
from margin.studies.plan import plan_study
from margin.studies.runner import run_study
from tests.support.cli import margin
from tests.support.paths import REPO
from tests.support.study import toy_server

pytestmark = pytest.mark.slow
HANG_S = 3.0
NO_MIX = FaultMix(http_5xx=0, hang=0, garbage=0, drop=0)


def run_guard(url: str, out: Path, *extra: str) -> dict:
    proc = margin("run", "--guard", "llama-guard-4", "--backend", "openai", "--base-url", url, "--suite", "quick",
                  "--no-cache", "--engine", "local", "--out", str(out), *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "snapshot.json").read_text())


def errors(out: Path) -> list[str]:
    return [r["error"] for r in map(json.loads, (out / "receipts.jsonl").read_text().splitlines())
            if r["kind"] == "call" and r["error"]]


def test_margin_run_through_faults_gives_the_clean_results(tmp_path):
    server, url = start_server(delay_s=0.0, label="keyword")
    try:
        clean = run_guard(url, tmp_path / "clean")
        with FaultProxy(url.removesuffix("/v1"), hang_s=HANG_S) as proxy:  # each run meets fresh faults
            faulty = run_guard(f"{proxy.url}/v1", tmp_path / "faulty")
        with FaultProxy(url.removesuffix("/v1"), hang_s=HANG_S) as again:
            # A 1 s limit cuts the hangs; on a loaded machine it also cuts some healthy
            # requests, so each text gets attempts enough that load never empties them.
            short = run_guard(f"{again.url}/v1", tmp_path / "short", "--call-timeout", "1", "--max-attempts", "8")
    finally:
        server.terminate()
        server.join(timeout=10)
    assert set(proxy.faults) == set(again.faults) == {"500", "503", "hang", "garbage", "drop"}, proxy.faults
    reference = (tmp_path / "clean" / "results.jsonl").read_bytes()
    for name, snapshot in (("faulty", faulty), ("short", short)):
        assert (tmp_path / name / "results.jsonl").read_bytes() == reference, name  # nothing lost, nothing wrong
        assert snapshot["data"][0]["coverage"] == clean["data"][0]["coverage"]
        seen = " | ".join(errors(tmp_path / name))
        for kind in ("Error code: 500", "Error code: 503", "JSONDecodeError", "Connection"):
            assert kind in seen, (name, kind)  # every attempt is in the receipts with its error
    assert any(e.startswith("timeout") for e in errors(tmp_path / "short"))


def study_config(tmp_path: Path, url: str, name: str) -> Path:
    config = yaml.safe_load((REPO / "studies" / "local.yaml").read_text())
    for model in [*config["models"], config["judge"]["model"], config["second_judge"]["model"]]:
        model["base_url"] = url
    config["prompts"] = {"limit": 16}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def cases(out: Path) -> list[dict]:
    """Every case of a study, the judges' ids left out (they hash the judge's server URL)."""
    lines = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    for case in lines:
        for judge in case["judges"]:
            judge.pop("id")
    return lines


def test_a_study_through_faults_gives_the_clean_pairings(tmp_path):
    with toy_server() as url, FaultProxy(url.removesuffix("/v1"), hang_s=HANG_S) as proxy:
        clean = run_study(plan_study(study_config(tmp_path, url, "clean")), tmp_path / "clean", engine="local",
                          cache=False)
        faulty = run_study(plan_study(study_config(tmp_path, f"{proxy.url}/v1", "faulty")), tmp_path / "faulty",
                           engine="local", cache=False)
    assert proxy.faults["hang"] and proxy.faults["drop"] and proxy.faults["garbage"]
    assert faulty.pairings["data"] == clean.pairings["data"]
    assert cases(tmp_path / "faulty") == cases(tmp_path / "clean")
    assert faulty.calls.missing == 0 and faulty.calls.retries > 0


def test_a_study_rides_out_an_outage_of_its_models_and_judges(tmp_path):
    with toy_server() as url, FaultProxy(url.removesuffix("/v1"), mix=NO_MIX,
                                         outage=Outage(after=30, seconds=2)) as proxy:
        clean = run_study(plan_study(study_config(tmp_path, url, "clean")), tmp_path / "clean", engine="local",
                          cache=False)
        path = study_config(tmp_path, f"{proxy.url}/v1", "outage")
        config = yaml.safe_load(path.read_text())
        config["runtime"] = {"max_attempts": 2, "max_outage_s": 120}  # an outage must use up none
        path.write_text(yaml.safe_dump(config))
        faulty = run_study(plan_study(path), tmp_path / "outage", engine="local", cache=False)
    assert proxy.downs == 1
    assert faulty.pairings["data"] == clean.pairings["data"]
    assert cases(tmp_path / "outage") == cases(tmp_path / "clean")
    assert faulty.calls.missing == 0
