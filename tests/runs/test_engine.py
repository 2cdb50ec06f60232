"""The Ray engine on the session's local cluster: same answers as the in-process path,
and nothing lost when guard actors die or hang."""

from __future__ import annotations

import contextlib

import pytest

from margin.guards.spec import GuardSpec
from margin.runfolder import read_jsonl
from margin.runs.executing.execute import execute
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare
from tests.support.guards import FaultScheduleGuard, HashGuard, SlowGuard

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_cluster")]


def run(out, guard, *, engine="ray", replicas=1, on_batch=None, **config):
    settings = {"dataset": "sample", "suite": "quick", "retry_wait_s": 0.0, "batch_size": 8,
                "cache": False, **config}
    spec = GuardSpec(name="keyword", replicas=replicas, num_cpus=0)  # runtime settings only
    prepared = prepare(RunConfig.of(guard=spec, engine=engine, **settings), guard=guard)
    return execute(prepared, out, on_batch=on_batch or (lambda *_: None))


def test_ray_engine_gives_the_in_process_results_and_cheapest_equals_exhaustive(tmp_path):
    guard = HashGuard(0.2, invalid_share=0.03, salt="e")
    local = run(tmp_path / "local", guard, engine="local", suite="standard")
    cheap = run(tmp_path / "cheap", guard, replicas=2, suite="standard")
    assert (tmp_path / "local" / "results.jsonl").read_bytes() == (tmp_path / "cheap" / "results.jsonl").read_bytes()
    assert cheap.guard_calls == local.guard_calls
    assert cheap.figures.batches > 0 and cheap.figures.compute_s > 0
    full = run(tmp_path / "full", guard, replicas=2, suite="standard", search="exhaustive", batch_size=64)
    assert [(r.prompt_id, r.flip_cost) for r in cheap.results] == [(r.prompt_id, r.flip_cost) for r in full.results]
    assert cheap.report.balanced_margin == full.report.balanced_margin
    assert cheap.guard_calls < full.guard_calls


def test_a_guard_actor_killed_mid_run_loses_nothing(tmp_path):
    import ray

    reference = run(tmp_path / "ref", HashGuard(0.3), engine="local")
    batches = []

    def kill_once(texts, capacity, compute_s):
        batches.append(texts)
        if len(batches) == 4:
            names = [n for n in ray.util.list_named_actors() if n.startswith("margin-guard-")]
            assert names  # this run's one actor (an earlier run's may still be on its way out)
            for name in names:
                with contextlib.suppress(ValueError):  # gone between the listing and now
                    ray.kill(ray.get_actor(name), no_restart=False)

    outcome = run(tmp_path / "killed", SlowGuard(0.05, unsafe_share=0.3), on_batch=kill_once)
    assert outcome.missing == 0 and outcome.figures.restarts >= 1
    assert (tmp_path / "ref" / "results.jsonl").read_bytes() == (tmp_path / "killed" / "results.jsonl").read_bytes()
    errors = [r["error"] for r in read_jsonl(tmp_path / "killed" / "receipts.jsonl") if r.get("error")]
    assert any("guard actor died" in e for e in errors)
    assert reference.missing == 0


def test_a_guard_that_errors_and_hangs_still_finishes_every_prompt(tmp_path):
    counter = tmp_path / "calls"
    reference = run(tmp_path / "ref", HashGuard(0.3), engine="local", limit=24)
    outcome = run(tmp_path / "faulty", FaultScheduleGuard(counter, unsafe_share=0.3), limit=24,
                  call_timeout_s=2.0)
    assert int(counter.read_text()) > 8 and outcome.figures.timeouts >= 1  # call 8 hung
    assert len(outcome.results) == 24
    for got, want in zip(outcome.results, reference.results, strict=True):
        assert got.status in ("scored", "missing")
        if got.status == "scored":
            assert (got.flip_cost, got.flip, got.guard_calls) == (want.flip_cost, want.flip, want.guard_calls)
    receipts = list(read_jsonl(tmp_path / "faulty" / "receipts.jsonl"))
    errors = [r["error"] for r in receipts if r["kind"] == "call" and r["error"]]
    assert any("timeout" in e for e in errors) and any("simulated guard failure" in e for e in errors)
    assert all(r["attempt"] <= 3 for r in receipts if r["kind"] == "call")


def test_drivers_split_the_prompts_over_shared_guard_actors_with_the_one_driver_results(tmp_path):
    """`--drivers 2`: two driver actors, one pair of guard actors started once; results and
    snapshot are the one driver's, byte for byte, and a killed-and-resumed run joins again."""
    import json

    from margin.guards.make import parse_guard_spec

    settings = {"dataset": "sample", "suite": "quick", "cache": False, "batch_size": 16, "driver_cpus": 0.25}
    spec = parse_guard_spec("keyword", replicas=2, num_cpus=0.25)
    one = execute(prepare(RunConfig.of(guard=spec, **settings)), tmp_path / "one")
    two = execute(prepare(RunConfig.of(guard=spec, drivers=2, **settings)), tmp_path / "two")
    assert (tmp_path / "one" / "results.jsonl").read_bytes() == (tmp_path / "two" / "results.jsonl").read_bytes()
    snapshots = [json.loads((tmp_path / d / "snapshot.json").read_text()) for d in ("one", "two")]
    assert snapshots[0]["data"] == snapshots[1]["data"]
    assert two.guard_calls == one.guard_calls and two.figures.batches > 0
    assert (tmp_path / "one" / "run.json").read_bytes() == (tmp_path / "two" / "run.json").read_bytes()
    parts = sorted(p.name for p in (tmp_path / "two" / "drivers").iterdir())
    assert parts == ["1-of-2", "2-of-2"]
    for j, part in enumerate(parts, start=1):  # each driver's record is the run's but for its shard
        assert json.loads((tmp_path / "two" / "drivers" / part / "run.json").read_text())["shard"] == [j, 2]
    lines = list(read_jsonl(tmp_path / "two" / "receipts.jsonl"))
    assert sum(r["kind"] == "call" for r in lines) == one.guard_calls and len({r["run_id"] for r in lines}) == 1
    # Resuming a finished run makes no call and writes the same results again.
    again = execute(prepare(RunConfig.of(guard=spec, drivers=2, **settings)), tmp_path / "two", resume=True)
    assert again.guard_calls == 0
    assert (tmp_path / "one" / "results.jsonl").read_bytes() == (tmp_path / "two" / "results.jsonl").read_bytes()
