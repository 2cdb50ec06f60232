"""The call book for model and judge requests: one call per distinct request, retries, replay,
and the chat-model backends' real code paths."""

from __future__ import annotations

from typing import Any

import pytest

from margin.engine.book import Outcome
from margin.studies.calls import StudyCalls, load_replay, request_key
from margin.studies.models import ChatModel, ModelReply, ModelSpec

MSG = [{"role": "user", "content": "hello"}]
OTHER = [{"role": "user", "content": "hello\u200b"}]


def book(**kwargs: Any) -> tuple[StudyCalls, list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    return StudyCalls(max_attempts={"m": 2}, retry_wait_s=0.0, on_record=records.append, **kwargs), records


def test_a_request_is_sent_once_and_later_askers_join_or_read_memory():
    calls, records = book()
    got: list[ModelReply | None] = []
    calls.request("m", "model-key", MSG, {"role": "response"}, got.append)
    calls.request("m", "model-key", MSG, {"role": "response"}, got.append)  # joins the queued one
    calls.request("m", "model-key", OTHER, {"role": "response"}, got.append)  # one code point apart: its own
    taken = calls.book.take("m", 10)
    assert [t.request for t in taken] == [MSG, OTHER]
    calls.book.deliver([Outcome(taken[0].key, 1, ModelReply("hi"), 0.1), Outcome(taken[1].key, 1, ModelReply("hey", True), 0.1)])
    assert got == [ModelReply("hi"), ModelReply("hi"), ModelReply("hey", True)]
    calls.request("m", "model-key", MSG, {"role": "response"}, got.append)  # answered from memory
    assert calls.book.finished and got[-1] == ModelReply("hi")
    assert calls.book.stats.sent == 2 and calls.counts.cached == 2
    assert [r["cached"] for r in records] == [False, False, True]  # a join writes no line of its own
    assert records[0]["key"] == request_key("model-key", MSG) and records[0]["role"] == "response"
    assert request_key("model-key", MSG) != request_key("other-model", MSG)


def test_replayed_outputs_answer_without_a_call_and_failed_attempts_continue():
    first, records = book()
    first.request("m", "k", MSG, {}, lambda _: None)
    first.request("m", "k", OTHER, {}, lambda _: None)
    taken = first.book.take("m", 5)
    first.book.deliver([Outcome(taken[0].key, 1, ModelReply("hi"), 0.0), Outcome(taken[1].key, 1, None, 0.0, "timeout")])
    replay = load_replay(records)
    assert replay.replies == {taken[0].key: ModelReply("hi")} and replay.failed == {taken[1].key: 1}
    resumed, again = book(replay=replay)
    got: list[ModelReply | None] = []
    resumed.request("m", "k", MSG, {}, got.append)
    resumed.request("m", "k", OTHER, {}, got.append)
    (ticket,) = resumed.book.take("m", 5)  # only the one without output, on its second attempt
    assert ticket.key == taken[1].key and ticket.attempt == 2
    resumed.book.deliver([Outcome(ticket.key, 2, ModelReply("hey"), 0.0)])
    assert got == [ModelReply("hi"), ModelReply("hey")] and resumed.counts.replayed == 1
    assert [r["output"] for r in again] == ["hey"]  # the replayed output is not written twice


def sends_until_missing(calls: StudyCalls) -> list[int]:
    """The attempt numbers a request gets, every one failing (charged), before it is missing."""
    got: list[ModelReply | None] = []
    calls.request("m", "k", MSG, {}, got.append)
    sent = []
    while not got:
        (ticket,) = calls.book.take("m", 5)
        sent.append(ticket.attempt)
        calls.book.deliver([Outcome(ticket.key, ticket.attempt, None, 0.0, "HTTP 500")])
    return sent


def test_a_resumed_request_keeps_the_attempts_its_waits_did_not_use_up():
    first, records = book()
    first.request("m", "k", MSG, {}, lambda _: None)
    (ticket,) = first.book.take("m", 5)
    first.book.deliver([Outcome(ticket.key, 1, None, 0.0, "HTTP 429", retry_after_s=0.0, charged=False)])
    assert [(r["error"], r["charged"]) for r in records] == [("HTTP 429", False)]  # the killed study's receipt
    assert sends_until_missing(book(replay=load_replay(records))[0]) == [2, 3]  # both of max_attempts 2
    old = [{k: v for k, v in r.items() if k != "charged"} for r in records]  # written before the field: charged
    assert sends_until_missing(book(replay=load_replay(old))[0]) == [2]


def test_model_specs_check_their_backend():
    with pytest.raises(ValueError, match="needs base_url"):
        ModelSpec(backend="openai", model="m")
    with pytest.raises(ValueError, match="base_url needs backend: openai"):
        ModelSpec(backend="transformers", model="m", base_url="http://x")
    with pytest.raises(ValueError, match="unknown backend option 'max_concurrency'"):
        ModelSpec(backend="vllm", model="m", backend_options={"max_concurrency": 4})
    spec = ModelSpec(backend="transformers", model="org/m@abc123")
    assert spec.checkpoint() == ("org/m", "abc123") and spec.cpus == 1.0
    assert ModelSpec(base_url="http://x/v1", model="m").cpus == 0.0


@pytest.mark.slow
def test_a_protected_model_on_transformers_generates_greedily(tmp_path):
    from tests.support.tiny_models import build_tiny_llama

    path = build_tiny_llama(tmp_path / "tiny")
    model = ChatModel(ModelSpec(backend="transformers", model=str(path), system_prompt="Be brief."), max_tokens=6)
    conversations = [[{"role": "user", "content": "How do I kill a Python process?"}],
                     [{"role": "user", "content": "What is the capital of France?"}]]
    first = model.generate(conversations)
    assert all(isinstance(r, ModelReply) for r in first)
    assert model.generate(conversations[:1]) == first[:1]  # greedy, and batching changes nothing
    long = [{"role": "user", "content": "word " * 400}]
    assert isinstance(model.generate([long])[0], Exception)  # over the context: an error, never truncated


@pytest.mark.ray
def test_a_model_actor_that_cannot_start_is_one_clear_error(ray_cluster, tmp_path):
    from margin.engine.loop import run_pools
    from margin.serving.calls import CallSettings
    from margin.studies.model_pools import model_pool

    spec = ModelSpec(backend="transformers", model=str(tmp_path / "no-such-model"), num_cpus=0)
    calls, _ = book()
    calls.request("m", "k", MSG, {}, lambda _: None)
    pool = model_pool("m", spec, 4, CallSettings(engine="ray"))
    pool.start_timeout_s = 120
    with pytest.raises(RuntimeError, match="every actor for m is gone"):
        run_pools(calls.book, [pool])
