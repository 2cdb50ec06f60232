"""An input no retry can answer (longer than a local model's window) is tried once and then
missing with its reason; an ordinary no-output is still retried to the limit. Through both
engines, and end to end with the real MiniLM guard."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from margin.engine.book import Backoff, Book
from margin.engine.local import LocalPool
from margin.engine.loop import run_pools
from margin.errors import UnanswerableInput
from tests.support.cli import margin

ATTEMPTS = 3


class Sometimes:
    """`long` can never be answered; `flaky` never answers either, but as an ordinary
    no-output; the rest are echoed. Counts the calls each key got (in this process)."""

    max_batch_size = 8
    asked: Counter[str] = Counter()

    def call(self, requests: list[str]) -> list[object]:
        Sometimes.asked.update(requests)
        return [UnanswerableInput("input is 300 tokens, over the 256-token window (never truncated)")
                if r == "long" else None if r == "flaky" else r.upper() for r in requests]

    def close(self) -> None:
        pass


class SometimesFactory:
    def build(self) -> Sometimes:
        return Sometimes()


def ask_all(pool) -> tuple[dict[str, object], list[tuple[str, int, bool, str | None]]]:
    answers: dict[str, object] = {}
    attempts: list[tuple[str, int, bool, str | None]] = []
    book = Book(answer=lambda owner, out: answers.__setitem__(owner, out),
                record=lambda owner, job, outcome: attempts.append((owner, outcome.attempt, outcome.retry,
                                                                      outcome.error)),
                record_known=lambda owner, out, origin: None, max_attempts=ATTEMPTS,
                backoff=Backoff(base_s=0.01, cap_s=0.01))
    for key in ("long", "flaky", "fine"):
        book.ask(pool.name, key, key, key)
    book.seal(pool.name)
    run_pools(book, [pool])
    return answers, attempts


def check(answers, attempts) -> None:
    assert answers == {"long": None, "flaky": None, "fine": "FINE"}
    tried = Counter(key for key, *_ in attempts)
    assert tried["long"] == 1 and tried["flaky"] == ATTEMPTS  # the window is not retried; the rest is
    ((_, _, retry, error),) = [a for a in attempts if a[0] == "long"]
    assert retry is False and "over the 256-token window" in error


def test_a_local_pool_tries_an_unanswerable_input_once():
    Sometimes.asked.clear()
    check(*ask_all(LocalPool("guard", Sometimes, max_batch_size=8)))
    assert Sometimes.asked["long"] == 1 and Sometimes.asked["flaky"] == ATTEMPTS


def test_an_actor_pool_tries_an_unanswerable_input_once(ray_cluster):
    from margin.engine.actors import ActorPool

    check(*ask_all(ActorPool("guard", SometimesFactory(), replicas=1, num_cpus=0.5, max_batch_size=8)))


def calls(run: Path) -> list[dict]:
    return [r for r in map(json.loads, (run / "receipts.jsonl").read_text().splitlines()) if r["kind"] == "call"]


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_minilm_records_a_prompt_over_its_window_missing_after_one_attempt(tmp_path, engine, ray_address):
    dataset = tmp_path / "long.csv"
    dataset.write_text("id,prompt,type,label\nlong,\"" + "Tell me about the river and the hill. " * 60
                       + "\",t,unsafe\nshort,How do I bake bread?,t,safe\n")
    out = tmp_path / "run"
    proc = margin("run", "--guard", "minilm", "--dataset", str(dataset), "--suite", "quick", "--out", str(out),
                  "--engine", engine, "--max-missing", "1", "--max-attempts", str(ATTEMPTS),
                  env={"MARGIN_CACHE_DIR": str(tmp_path / "cache")})
    records = calls(out)
    long = [c for c in records if c["prompt_id"] == "long"]
    assert long and all(c["verdict"] is None and c["attempt"] == 1 for c in long), proc.stderr
    assert all("over the 256-token window (never truncated)" in c["error"] for c in long)
    assert any(c["prompt_id"] == "short" and c["verdict"] is not None for c in records)
