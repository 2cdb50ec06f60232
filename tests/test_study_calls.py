"""The call book for model and judge requests: one call per distinct request, retries, replay,
and the chat-model backends' real code paths."""

from __future__ import annotations

from typing import Any

import pytest

from margin.studies.calls import Calls, load_replay, request_key
from margin.studies.models import ChatModel, ModelSpec, Reply

MSG = [{"role": "user", "content": "hello"}]
OTHER = [{"role": "user", "content": "hello\u200b"}]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def book(**kwargs: Any) -> tuple[Calls, list[dict[str, Any]], Clock]:
    records: list[dict[str, Any]] = []
    clock = Clock()
    return Calls(["m"], on_record=records.append, clock=clock, **kwargs), records, clock


def test_a_request_is_sent_once_and_later_askers_join_or_read_memory():
    calls, records, _ = book()
    got: list[Reply | None] = []
    calls.request("m", "model-key", MSG, {"role": "response"}, got.append)
    calls.request("m", "model-key", MSG, {"role": "response"}, got.append)  # joins the queued one
    calls.request("m", "model-key", OTHER, {"role": "response"}, got.append)  # one code point apart: its own
    taken = calls.take("m", 10)
    assert [m for _, m, _ in taken] == [MSG, OTHER]
    calls.deliver([(taken[0][0], 1, Reply("hi"), 0.1, None), (taken[1][0], 1, Reply("hey", True), 0.1, None)])
    assert got == [Reply("hi"), Reply("hi"), Reply("hey", True)]
    calls.request("m", "model-key", MSG, {"role": "response"}, got.append)  # answered from memory
    assert calls.finished and got[-1] == Reply("hi")
    assert calls.stats.sent == 2 and calls.stats.cached == 2
    assert [r["cached"] for r in records] == [False, False, True]  # a join writes no line of its own
    assert request_key("model-key", MSG) != request_key("other-model", MSG)


def test_no_output_is_retried_with_backoff_then_missing():
    calls, records, clock = book(max_attempts=3, retry_wait_s=1.0)
    got: list[Reply | None] = []
    calls.request("m", "k", MSG, {}, got.append)
    for attempt, wait in ((1, 1.0), (2, 2.0)):
        (key, _, n), = calls.take("m", 5)
        assert n == attempt
        calls.deliver([(key, n, None, 0.0, "HTTP 500")])
        assert calls.take("m", 5) == [] and calls.next_due() == clock.now + wait
        clock.now += wait
    (key, _, n), = calls.take("m", 5)
    calls.deliver([(key, n, None, 0.0, "HTTP 500")])
    assert got == [None] and calls.finished and calls.stats.missing == 1
    assert [r["attempt"] for r in records] == [1, 2, 3] and all(r["error"] == "HTTP 500" for r in records)


def test_replayed_outputs_answer_without_a_call_and_failed_attempts_continue():
    first, records, _ = book(max_attempts=2)
    first.request("m", "k", MSG, {}, lambda _: None)
    first.request("m", "k", OTHER, {}, lambda _: None)
    taken = first.take("m", 5)
    first.deliver([(taken[0][0], 1, Reply("hi"), 0.0, None), (taken[1][0], 1, None, 0.0, "timeout")])
    replies, failed = load_replay(records)
    assert replies == {taken[0][0]: Reply("hi")} and failed == {taken[1][0]: 1}
    resumed, again, _ = book(max_attempts=2, replay=replies, failed=failed)
    got: list[Reply | None] = []
    resumed.request("m", "k", MSG, {}, got.append)
    resumed.request("m", "k", OTHER, {}, got.append)
    (key, _, attempt), = resumed.take("m", 5)  # only the one without output, on its second attempt
    assert key == taken[1][0] and attempt == 2
    resumed.deliver([(key, attempt, Reply("hey"), 0.0, None)])
    assert got == [Reply("hi"), Reply("hey")] and resumed.stats.replayed == 1
    assert [r["output"] for r in again] == ["hey"]  # the replayed output is not written twice


def test_model_specs_check_their_backend():
    with pytest.raises(ValueError, match="needs base_url"):
        ModelSpec(backend="openai", model="m")
    with pytest.raises(ValueError, match="base_url needs backend: openai"):
        ModelSpec(backend="transformers", model="m", base_url="http://x")
    with pytest.raises(ValueError, match="unknown backend option 'concurrency'"):
        ModelSpec(backend="vllm", model="m", backend_options={"concurrency": 4})
    spec = ModelSpec(backend="transformers", model="org/m@abc123")
    assert spec.checkpoint() == ("org/m", "abc123") and spec.cpus == 1.0
    assert ModelSpec(base_url="http://x/v1", model="m").cpus == 0.0


@pytest.mark.slow
def test_a_protected_model_on_transformers_generates_greedily(tmp_path):
    from tests.tiny_models import build_tiny_llama

    path = build_tiny_llama(tmp_path / "tiny")
    model = ChatModel(ModelSpec(backend="transformers", model=str(path), system_prompt="Be brief."), max_tokens=6)
    conversations = [[{"role": "user", "content": "How do I kill a Python process?"}],
                     [{"role": "user", "content": "What is the capital of France?"}]]
    first = model.generate(conversations)
    assert all(isinstance(r, Reply) for r in first)
    assert model.generate(conversations[:1]) == first[:1]  # greedy, and batching changes nothing
    long = [{"role": "user", "content": "word " * 400}]
    assert isinstance(model.generate([long])[0], Exception)  # over the context: an error, never truncated


@pytest.mark.ray
def test_a_model_actor_that_cannot_start_is_one_clear_error(ray_cluster, tmp_path):
    from margin.studies.executors import PoolSpec, RayExecutor

    spec = ModelSpec(backend="transformers", model=str(tmp_path / "no-such-model"), num_cpus=0)
    calls = Calls(["m"], max_attempts=1)
    calls.request("m", "k", MSG, {}, lambda _: None)
    with pytest.raises(RuntimeError, match="the actor for m could not start"):
        RayExecutor({"m": PoolSpec(spec, 4)}, start_timeout_s=120).run(calls)
