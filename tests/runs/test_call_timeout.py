"""`--call-timeout` (a study's `runtime.call_timeout_s`) is honoured or refused on every
engine, never ignored: an endpoint's request on either engine, a batch on Ray actors (one
driver or several), refused for a model in margin's own process (`--engine local`).

The Ray actors' enforcement itself (a hung batch restarts its actor) is
tests/runs/test_engine.py's; here, that each engine's pool is given the limit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.fault_proxy import FaultMix, FaultProxy
from benchmarks.http_guard import start_server
from margin.engine.actors import ActorPool
from margin.engine.limits import EndpointLimits
from margin.engine.settings import CALL_TIMEOUT
from margin.guards.make import parse_guard_spec
from margin.runs.executing.drivers import shared_guard_pool
from margin.runs.preparing.config import RunConfig
from margin.serving.calls import CallSettings
from margin.serving.guard_pool import guard_pool
from margin.studies.model_pools import model_limits, model_pool
from margin.studies.models import ModelSpec
from margin.studies.plan import plan_study
from margin.studies.runner import check_call_timeout
from tests.support.cli import margin
from tests.support.study import study_config, write_config


def test_run_refuses_it_for_a_guard_in_this_process(tmp_path):
    out = tmp_path / "run"
    proc = margin("run", "--guard", "keyword", "--engine", "local", "--call-timeout", "5", "--limit", "2",
                  "--out", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--call-timeout" in proc.stderr and "--engine local" in proc.stderr and len(proc.stderr.splitlines()) == 1
    assert not out.exists()


@pytest.mark.slow  # a server, a proxy and a margin process (tests/studies/test_faults.py does the same at size)
def test_run_on_the_local_engine_honours_it_for_an_endpoint(tmp_path):
    """A guard behind an endpoint streams from this process on either engine: a request past
    the limit is an attempt without output (and is asked again), never waited out."""
    server, url = start_server(delay_s=0.0, label="keyword")
    try:
        with FaultProxy(url.removesuffix("/v1"), mix=FaultMix(http_5xx=0, hang=0.15, garbage=0, drop=0),
                        hang_s=60) as proxy:
            out = tmp_path / "run"
            proc = margin("run", "--guard", "llama-guard-4", "--backend", "openai", "--base-url", f"{proxy.url}/v1",
                          "--suite", "quick", "--limit", "4", "--no-cache", "--engine", "local",
                          "--call-timeout", "0.5", "--max-attempts", "8", "--out", str(out))
    finally:
        server.terminate()
        server.join(timeout=10)
    assert proc.returncode == 0, proc.stderr
    assert proxy.faults["hang"] >= 5  # several hung first attempts (7 here), each cut and asked again
    calls = [json.loads(line) for line in (out / "receipts.jsonl").read_text().splitlines()]
    errors = [c["error"] for c in calls if c["kind"] == "call" and c["error"]]
    assert any(e.startswith("timeout: no answer within 0.5 s") for e in errors), errors
    assert all(json.loads(line)["status"] == "scored" for line in (out / "results.jsonl").read_text().splitlines())


def test_an_endpoints_request_limit_is_the_flag_over_the_guard_file_over_the_default():
    assert CallSettings().limits({}).timeout_s == CALL_TIMEOUT.case("request")
    assert CallSettings().limits({"timeout_s": 30}).timeout_s == 30
    assert CallSettings(engine="local", call_timeout_s=2.0).limits({"timeout_s": 30}).timeout_s == 2.0


def test_ray_actors_get_it_as_their_batch_limit():
    spec = parse_guard_spec("keyword")
    for given, expected in ((None, CALL_TIMEOUT.case("batch")), (7.0, 7.0)):
        settings = CallSettings(engine="ray", call_timeout_s=given)
        pool = guard_pool(spec, None, engine="ray", batch_size=8, limits=EndpointLimits(),
                          call_timeout_s=settings.batch_timeout_s)
        assert isinstance(pool, ActorPool) and pool.call_timeout_s == expected
        assert not settings.timeout_cannot_apply(in_process=True)


def test_several_drivers_share_the_guards_actors_with_the_same_limit():
    for given, expected in ((None, CALL_TIMEOUT.case("batch")), (7.0, 7.0)):
        config = RunConfig.of(guard="keyword", drivers=2, call_timeout_s=given)
        pool = shared_guard_pool(config, [object(), object()], capacity=16)  # stand-ins for running actors
        assert pool.call_timeout_s == expected and not pool.owns and pool.replicas == 2


def study_with_timeout(tmp_path: Path, guard: object = "keyword") -> Path:
    config = study_config("http://127.0.0.1:9/v1", guard=guard)
    config["runtime"]["call_timeout_s"] = 5
    return write_config(tmp_path, config)


def test_a_study_on_the_local_engine_refuses_it_for_a_guard_in_this_process(tmp_path):
    path = study_with_timeout(tmp_path)
    out = tmp_path / "out"
    proc = margin("study", str(path), "--engine", "local", "--out", str(out))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if "call_timeout_s" in text)
    assert f"{path}:{line}" in proc.stderr and "runtime.call_timeout_s" in proc.stderr
    assert "guard keyword runs in this process" in proc.stderr and "--engine ray" in proc.stderr
    assert not out.exists()


def test_a_study_honours_it_where_it_can_apply(tmp_path):
    """Every endpoint's request (either engine), and in-process models' batches on Ray actors."""
    remote_guard = {"guard": "llama-guard-4", "backend": "openai", "base_url": "http://127.0.0.1:9/v1"}
    plan = plan_study(study_with_timeout(tmp_path, remote_guard), servers=False)  # no server at :9
    local = CallSettings(engine="local", call_timeout_s=plan.config.runtime.call_timeout_s)
    check_call_timeout(plan, local)  # all behind endpoints: nothing in this process to stop
    assert all(model_limits(m.spec, local).timeout_s == 5 for m in plan.models)
    assert local.limits(dict(plan.guards[0].input.spec.backend_options)).timeout_s == 5
    in_process = ModelSpec(backend="transformers", model="some/checkpoint")
    pool = model_pool("model", in_process, 16, CallSettings(engine="ray", call_timeout_s=5))
    assert isinstance(pool, ActorPool) and pool.call_timeout_s == 5
    default = model_pool("model", in_process, 16, CallSettings(engine="ray"))
    assert isinstance(default, ActorPool) and default.call_timeout_s == CALL_TIMEOUT.case("model")
