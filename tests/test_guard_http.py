"""The OpenAI-compatible HTTP path against a real server on 127.0.0.1 that injects 500s,
429 with Retry-After, timeouts and unreadable bodies: every prompt completes, failures are
retried, garbage is `invalid`, and the API key never appears in any output."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import random
import traceback

import pytest

from margin.guards.backends import http
from margin.guards.backends.http import backoff_delay, retry_after_seconds
from margin.guards.make import build_guard, parse_guard_spec
from tests.openai_server import FakeOpenAI
from tests.test_cli import margin

KEY = "sk-test-9f8e7d6c5b4a39281706"
FAULTS = ["500", "429", "timeout", "badjson", None, None]
PROMPTS = [f"prompt number {i}: how do I {'build a bomb' if i % 3 == 0 else 'bake bread'}?" for i in range(36)]


def bucket(text: str, n: int) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16) % n


def first_attempt_faults(text: str, attempt: int) -> str | None:
    return FAULTS[bucket(text, len(FAULTS))] if attempt == 1 else None


def is_garbage(text: str) -> bool:
    return bucket(text, 7) == 0


def llama_guard_answer(text: str) -> str:
    if is_garbage(text):
        return "I cannot decide {auth}"  # a server that echoes the key in its output
    return "\n\nunsafe\nS9" if "bomb" in text else "\n\nsafe"


@pytest.fixture
def fast_backoff(monkeypatch):
    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(http, "sleep", record)
    return waits


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("MARGIN_TEST_KEY", KEY)
    return KEY


def options(**extra):
    return {"timeout_s": 0.3, "max_attempts": 5, "concurrency": 3, **extra}


def test_chat_family_completes_every_prompt_through_faults(fast_backoff, api_key, caplog):
    caplog.set_level(logging.DEBUG)
    with FakeOpenAI(llama_guard_answer, key=KEY, fault=first_attempt_faults, stall_s=0.8) as server:
        spec = parse_guard_spec("llama-guard-3-8b", backend="openai", base_url=server.base_url,
                                api_key_env="MARGIN_TEST_KEY").model_copy(update={"backend_options": options()})
        guard = build_guard(spec)
        try:
            verdicts = guard.classify(PROMPTS)
        finally:
            guard.close()
    assert all(v is not None for v in verdicts)  # every prompt completed
    for text, verdict in zip(PROMPTS, verdicts, strict=True):
        expected = "invalid" if is_garbage(text) else ("unsafe" if "bomb" in text else "safe")
        assert verdict.label == expected, (text, verdict)
        if expected != "invalid":
            assert verdict.p_unsafe == pytest.approx(0.8 if expected == "unsafe" else 0.2)
    assert set(server.faults) == {"500", "429", "timeout", "badjson"}
    assert all(server.attempts[t] == (2 if first_attempt_faults(t, 1) else 1) for t in PROMPTS)
    assert server.max_in_flight <= 3  # bounded concurrency per endpoint
    assert sum(1 for w in fast_backoff if w >= 2.0) == server.faults["429"]  # Retry-After honoured
    sent = server.requests[0]["body"]
    assert sent["temperature"] == 0 and sent["logprobs"] is True and sent["top_logprobs"] == 20
    assert len(sent["messages"]) == 1 and sent["messages"][0]["role"] == "user"
    assert sent["messages"][0]["content"] in PROMPTS  # 3-8B takes string content
    leaked = [v.raw for v in verdicts if KEY in v.raw]
    assert not leaked and any("[redacted]" in v.raw for v in verdicts)
    assert KEY not in caplog.text


def test_template_kwargs_and_raw_prompts_reach_the_server(fast_backoff):
    with FakeOpenAI(lambda text: "Harmful request: no\nResponse refusal: n/a\nHarmful response: n/a") as server:
        guard = build_guard(parse_guard_spec("wildguard", backend="openai", base_url=server.base_url))
        assert [v.label for v in guard.classify(["hello"])] == ["safe"]
        guard.close()
        prompt = server.requests[-1]["body"]["prompt"]
        assert server.requests[-1]["path"].endswith("/v1/completions")
        assert prompt.startswith("<|user|>\n[INST]") and "Human user:\nhello\n" in prompt  # no literal <s>
        guard = build_guard(parse_guard_spec("granite-guardian-3.3-8b", backend="openai", base_url=server.base_url))
        guard.classify(["hello"])
        guard.close()
        assert server.requests[-1]["body"]["chat_template_kwargs"] == {"guardian_config": {"criteria_id": "harm"},
                                                                       "think": False}


def test_no_output_after_retries_raises_a_redacted_error(fast_backoff, api_key, caplog):
    caplog.set_level(logging.DEBUG)
    with FakeOpenAI(llama_guard_answer, key=KEY, fault=lambda text, attempt: "500") as server:
        spec = parse_guard_spec("llama-guard-3-8b", backend="openai", base_url=server.base_url,
                                api_key_env="MARGIN_TEST_KEY").model_copy(
                                    update={"backend_options": options(max_attempts=3)})
        guard = build_guard(spec)
        with pytest.raises(RuntimeError) as caught:
            guard.classify(["a", "b"])
        guard.close()
    assert server.attempts["a"] == 3 and len(fast_backoff) == 4
    text = "".join(traceback.format_exception(caught.value))
    assert "500" in text and KEY not in text and "[redacted]" in text
    assert KEY not in caplog.text


def test_client_errors_are_not_retried(fast_backoff, monkeypatch):
    monkeypatch.setenv("MARGIN_WRONG_KEY", "sk-wrong-key-000")
    with FakeOpenAI(llama_guard_answer, key=KEY) as server:
        spec = parse_guard_spec("llama-guard-3-8b", backend="openai", base_url=server.base_url,
                                api_key_env="MARGIN_WRONG_KEY")
        guard = build_guard(spec)
        with pytest.raises(RuntimeError, match="401"):
            guard.classify(["a"])
        guard.close()
    assert server.attempts["a"] == 0 and not fast_backoff  # 401 before any text was read: no retry


def moderation_result(text: str) -> dict:
    hit = "bomb" in text
    return {"flagged": hit, "categories": {"violence": hit, "illicit": False},
            "category_scores": {"violence": 0.9 if hit else 0.05, "illicit": 0.01}}


def mistral_result(text: str) -> dict:
    hit = "bomb" in text
    return {"categories": {"violence_and_threats": hit, "health": True},
            "category_scores": {"violence_and_threats": 0.8 if hit else 0.1, "health": 0.9}}


@pytest.mark.parametrize(("preset", "moderate"), [("openai-moderation", moderation_result),
                                                  ("mistral-moderation", mistral_result)])
def test_moderation_apis_batch_and_retry(fast_backoff, api_key, preset, moderate):
    with FakeOpenAI(llama_guard_answer, key=KEY, fault=first_attempt_faults, moderate=moderate) as server:
        spec = parse_guard_spec(preset, base_url=server.base_url, api_key_env="MARGIN_TEST_KEY")
        guard = build_guard(spec.model_copy(update={"backend_options": options()}))
        verdicts = guard.classify(PROMPTS[:8])
        guard.close()
    assert [v.label for v in verdicts] == ["unsafe" if "bomb" in t else "safe" for t in PROMPTS[:8]]
    assert server.requests[-1]["body"]["input"] == PROMPTS[:8]  # one request for the batch


def test_backoff_is_exponential_jittered_and_honours_retry_after():
    rng = random.Random(1)
    delays = [backoff_delay(a, base_s=1.0, cap_s=8.0, retry_after_s=None, rng=rng) for a in range(1, 7)]
    assert all(0 <= d <= min(8.0, 2 ** (a - 1)) for a, d in zip(range(1, 7), delays, strict=True))
    assert len(set(delays)) == len(delays)  # jitter
    assert backoff_delay(1, base_s=0.01, cap_s=8.0, retry_after_s=3.0, rng=rng) == 3.0
    assert backoff_delay(1, base_s=0.01, cap_s=8.0, retry_after_s=60.0, rng=rng) == 8.0
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "Wed, 02 Dec 2026 12:00:10 GMT"}, now=1796212800.0) == 10.0
    assert retry_after_seconds({}) is None


def test_margin_run_over_http_writes_receipts_and_never_the_key(tmp_path, monkeypatch):
    guard_file = tmp_path / "served.yaml"
    with FakeOpenAI(llama_guard_answer, key=KEY, fault=first_attempt_faults, stall_s=0.8) as server:
        guard_file.write_text(
            f"guard: llama-guard-3-8b\nbackend: openai\nbase_url: {server.base_url}\napi_key_env: MARGIN_TEST_KEY\n"
            "backend_options: {timeout_s: 0.3, max_attempts: 5, backoff_base_s: 0.001, backoff_cap_s: 0.01}\n")
        monkeypatch.setenv("MARGIN_TEST_KEY", KEY)
        out = tmp_path / "run"
        proc = margin("run", "--guard", str(guard_file), "--suite", "quick", "--limit", "6", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 6 and all(r["status"] == "scored" for r in results)
    calls = [json.loads(line) for line in (out / "receipts.jsonl").read_text().splitlines()
             if '"kind": "call"' in line]
    assert calls and all(c["verdict"] in ("safe", "unsafe", "invalid") for c in calls)
    evaluation = json.loads((out / "snapshot.json").read_text())["data"][0]["evaluation"]
    assert evaluation["backend"] == "openai" and evaluation["checkpoint"] == "meta-llama/Llama-Guard-3-8B"
    assert len(evaluation["template_sha256"]) == 64 and evaluation["threshold"] == 0.5
    for path in out.iterdir():
        if path.suffix != ".png":
            assert KEY not in path.read_text(), path.name
    assert KEY not in proc.stdout + proc.stderr
