"""A request the server drops every time (the connection closed or reset, no answer) is that
request's failure, not an outage: it uses up its attempts and ends missing while the endpoint
answers the others, whether one pool sends it or several pools share the endpoint (a study's
model and judge on one server). Real HTTP servers on 127.0.0.1 (tests/support/openai_server.py);
an endpoint that fails everything is still an outage (tests/backends/test_guard_http.py,
tests/runs/test_outages.py)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Hashable

import pytest

from margin.engine.book import Backoff, Book, Outcome
from margin.engine.limits import EndpointLimits
from margin.engine.loop import run_pools
from margin.engine.stream import StreamPool
from margin.guards.make import build_guard, parse_guard_spec
from margin.serving.guard_pool import RemoteGuardCaller
from tests.support.cli import margin
from tests.support.openai_server import FakeOpenAI

ATTEMPTS = 3


def keyword_answer(text: str) -> str:
    """Llama Guard's format, by margin's keyword guard; a little slower than a drop, as real
    answers are, so drops come back in streaks that pause the endpoint."""
    from margin.guards.keyword import KeywordGuard

    time.sleep(0.01)
    verdict = KeywordGuard().classify([text])[0]
    assert verdict is not None
    return f"\n\n{verdict.label}"


def drops(kind: str, dropped: set[str]):
    """The server's fault rule: `kind` ("drop": closed, "reset": an RST) for every attempt at
    a text in `dropped`, nothing for the others."""
    return lambda text, attempt: kind if text in dropped else None


def through_the_engine(url: str, texts: dict[str, list[str]]) -> tuple[dict[Hashable, object], list[Outcome]]:
    """Each pool's texts through one book, a stream pool per name, all on `url` (so they share
    its breaker); returns the answers by (pool, text) and every outcome in the order recorded."""
    answers: dict[Hashable, object] = {}
    recorded: list[Outcome] = []
    book = Book(answer=lambda owner, output: answers.__setitem__(owner, output),
                record=lambda _owner, _job, outcome: recorded.append(outcome),
                max_attempts=ATTEMPTS, backoff=Backoff(0.001, 0.02))
    spec = parse_guard_spec("llama-guard-3-8b", backend="openai", base_url=url)
    limits = EndpointLimits(timeout_s=30, max_attempts=ATTEMPTS, max_concurrency=32, hedge_after_s=None,
                            max_outage_s=10)
    pools = []
    for name, mine in texts.items():
        for text in mine:
            book.ask(name, (name, text), text, (name, text))
        pools.append(StreamPool(name, RemoteGuardCaller(build_guard(spec)), limits, url=url))
    run_pools(book, pools)  # an EndpointDown here would be the dropped texts taken for an outage
    return answers, recorded


def charged_failures(recorded: list[Outcome]) -> Counter[Hashable]:
    return Counter(o.key for o in recorded if o.output is None and o.charged)


def uncharged_after_an_answer(recorded: list[Outcome]) -> list[Outcome]:
    """Failures that used up no attempt although the endpoint had answered before them:
    once it has answered, only a failed health check could show it down, and it never fails here."""
    first = next(i for i, o in enumerate(recorded) if o.output is not None)
    return [o for o in recorded[first:] if o.output is None and not o.charged]


@pytest.mark.parametrize("kind", ["drop", "reset"])
def test_texts_the_server_drops_every_time_use_up_their_attempts_while_the_rest_is_answered(kind):
    texts = [f"question {i}: how do I {'build a bomb' if i % 3 else 'bake bread'}?" for i in range(96)]
    dropped = set(texts[::4])
    with FakeOpenAI(keyword_answer, fault=drops(kind, dropped)) as server:
        answers, recorded = through_the_engine(server.base_url, {"guard": texts})
    assert all(answers[("guard", t)] is None for t in dropped)
    assert all(answers[("guard", t)] is not None for t in texts if t not in dropped)
    assert server.faults[kind] >= ATTEMPTS * len(dropped)
    assert set(charged_failures(recorded).values()) == {ATTEMPTS}  # each dropped text: all its attempts
    assert set(charged_failures(recorded)) == {("guard", t) for t in dropped}
    assert not uncharged_after_an_answer(recorded)


def test_a_pool_whose_every_request_is_dropped_beside_one_answered_on_the_same_endpoint():
    """Two pools on one URL (a study's model and judge): every request of one is dropped. The
    endpoint is up (the other's are answered), so the dropped texts end missing after their
    attempts, rather than waiting as an outage that the other pool's answers keep resetting."""
    dropped = [f"dropped {i}" for i in range(6)]
    answered = [f"answered {i}" for i in range(40)]
    with FakeOpenAI(keyword_answer, fault=drops("drop", set(dropped))) as server:
        answers, recorded = through_the_engine(server.base_url, {"model": dropped, "judge": answered})
    assert all(answers[("model", t)] is None for t in dropped)
    assert all(answers[("judge", t)] is not None for t in answered)
    assert charged_failures(recorded) == {("model", t): ATTEMPTS for t in dropped}
    assert not uncharged_after_an_answer(recorded)


def test_a_run_whose_prompt_the_server_drops_ends_with_that_prompt_missing(tmp_path):
    """`margin run` against a server that closes the connection on one prompt every time: the
    run ends, that prompt is missing after --max-attempts charged attempts, the others are
    scored (--max-outage is never reached: the endpoint answers the other texts)."""
    target = "How can I execute a shell script every hour?"  # s3 of the bundled sample
    out = tmp_path / "run"
    with FakeOpenAI(keyword_answer, fault=drops("drop", {target})) as server:
        proc = margin("run", "--guard", "llama-guard-4", "--backend", "openai", "--base-url", server.base_url,
                      "--suite", "quick", "--limit", "8", "--no-cache", "--engine", "local", "--max-attempts", "3",
                      "--max-outage", "20s", "--max-missing", "50%", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert server.attempts[target] == 3  # charged each time: no attempt given back as a wait
    results = {r["prompt_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert results["s3"]["status"] == "missing"
    assert len(results) == 8 and all(r["status"] == "scored" for p, r in results.items() if p != "s3")
    calls = [c for c in map(json.loads, (out / "receipts.jsonl").read_text().splitlines()) if c["kind"] == "call"]
    failed = [c for c in calls if c["verdict"] is None]
    assert len(failed) == 3 and all(c["charged"] is True and "Connection" in c["error"] for c in failed)


def test_a_study_whose_model_drops_some_texts_every_time_ends_with_those_responses_missing(tmp_path):
    """The study path: its model and its judge on one server (one shared breaker), which drops
    the model's request for 10 of the 12 transformed prompts every time (enough in a row to
    pause the endpoint) and answers the rest a little slower. The study ends; those responses are missing after the model's attempts,
    each charged (the endpoint answered the others), and every other pair is judged."""
    from margin.datasets import load_dataset
    from margin.studies.plan import plan_study
    from margin.studies.runner import run_study
    from tests.support.study import study_config, toy_module, write_config

    toy = toy_module()
    texts = {p.id: p.text for p in load_dataset("sample").prompts}
    dropped = {texts[i] for i in study_config("")["prompts"]["ids"][:10]}  # 10 of the study's 12 prompts

    def answer(text: str) -> str:  # the judge's prompt quotes both responses; the model gets the prompt
        time.sleep(0.01)
        return toy.judge("toy-judge", text) if "<original_response>" in text else toy.assistant("toy-medium", text)

    def fault(text: str, attempt: int) -> str | None:  # zero-width spaces throughout: the transformed prompt
        return "drop" if "\u200b" in text and text.replace("\u200b", "") in dropped else None

    with FakeOpenAI(answer, fault=fault) as server:
        config = study_config(server.base_url)  # the judge on the model's URL
        config["runtime"].update(max_attempts=ATTEMPTS, max_outage_s=20)
        outcome = run_study(plan_study(write_config(tmp_path, config)), tmp_path / "out", engine="local", cache=False)
    [pair] = outcome.pairings["data"]
    assert pair["coverage"]["missing"] == {"guard_verdicts": 0, "responses": 10, "judge_outputs": 0}
    assert pair["coverage"]["asked"]["judge_outputs"] == 2 and "Connection" in pair["coverage"]["reason"]
    calls = [json.loads(line) for line in (tmp_path / "out" / "calls.jsonl").read_text("utf-8").splitlines()]
    failed = [c for c in calls if c["output"] is None]
    assert Counter(c["key"] for c in failed if c["charged"]) == dict.fromkeys({c["key"] for c in failed}, ATTEMPTS)
    first = next(i for i, c in enumerate(calls) if c["output"] is not None)
    assert not [c for c in calls[first:] if c["output"] is None and not c["charged"]]  # none given back once it answered


def test_a_run_that_asks_many_dropped_texts_at_once_charges_each_its_attempts(tmp_path):
    """`margin run --search exhaustive` sends a prompt's candidates together, so a server that
    drops every text holding a zero-width space (and one prompt outright) fails many requests
    in a row and pauses itself; once it has answered, none of those failures is given back
    uncharged, and each dropped text ends missing after exactly its attempts."""
    target = "How can I execute a shell script every hour?"  # s3 of the bundled sample
    out = tmp_path / "run"

    def fault(text: str, attempt: int) -> str | None:
        return "drop" if text == target or "\u200b" in text else None

    with FakeOpenAI(keyword_answer, fault=fault) as server:
        proc = margin("run", "--guard", "llama-guard-4", "--backend", "openai", "--base-url", server.base_url,
                      "--suite", "quick", "--search", "exhaustive", "--limit", "8", "--no-cache", "--engine", "local",
                      "--max-attempts", "3", "--max-outage", "20s", "--max-missing", "100%", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    results = {r["prompt_id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert len(results) == 8 and results["s3"]["status"] == "missing"
    calls = [c for c in map(json.loads, (out / "receipts.jsonl").read_text().splitlines()) if c["kind"] == "call"]
    failed = [c for c in calls if c["verdict"] is None]
    assert len({c["text_sha256"] for c in failed}) > 8  # many texts dropped
    charged = Counter(c["text_sha256"] for c in failed if c["charged"])
    assert charged == dict.fromkeys({c["text_sha256"] for c in failed}, 3)
    first = next(i for i, c in enumerate(calls) if c["verdict"] is not None)
    assert not [c for c in calls[first:] if c["verdict"] is None and not c["charged"]]
