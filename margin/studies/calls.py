"""Model and judge calls for a study, on the call engine's request book.

A request is keyed by its model's identity and its exact messages (`request_key`), so the
book sends each distinct request once, joins repeats, and answers from this study's memory,
the killed study's receipts (resume) or the response cache. Every attempt, and every answer
given without a call, becomes one line of `calls.jsonl` through `on_record` (a join writes
no line of its own: the call it joined records the output).

An owner's callback may make new requests (a judge request once both responses are in).
A model that answers none of its first requests stops the study (`health`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from margin.engine.book import Backoff, Book, Job, Origin, Outcome, Store, note_failed_attempt
from margin.engine.settings import RETRY_WAIT
from margin.studies.health import Health
from margin.studies.models import Messages, ModelReply
from margin.util.hashing import canonical_json, sha256_text

OnDone = Callable[[ModelReply | None], None]
OnRecord = Callable[[dict[str, Any]], None]


def request_key(model_key: str, messages: Messages) -> str:
    return sha256_text(canonical_json({"model": model_key, "messages": messages}))


@dataclass(frozen=True, slots=True)
class Owner:
    pool: str
    key: str
    tag: dict[str, Any]  # what its receipt says (role, model, prompt, transform)
    done: OnDone


@dataclass
class StudyReplay:
    """What a killed study recorded in `calls.jsonl`."""

    replies: dict[str, ModelReply]
    failed: dict[str, int]  # key -> its last attempt without output
    waits: dict[str, int]  # key -> attempts without output that used up none

    def output(self, key: str) -> ModelReply | None:
        return self.replies.get(key)

    def failed_attempts(self, key: str) -> int:
        return self.failed.get(key, 0)

    def uncharged(self, key: str) -> int:
        return self.waits.get(key, 0)


def load_replay(records: Iterable[dict[str, Any]]) -> StudyReplay:
    """Completed outputs and attempts without output, by key, from a killed study's receipts."""
    replies: dict[str, ModelReply] = {}
    failed: dict[str, int] = {}
    waits: dict[str, int] = {}
    for record in records:
        if record.get("kind") != "call":
            continue
        key = record["key"]
        if record.get("output") is not None:
            replies[key] = ModelReply(record["output"], bool(record.get("truncated")))
        elif not record.get("cached"):
            note_failed_attempt(failed, waits, key, record)
    return StudyReplay(replies, failed, waits)


@dataclass
class CallCounts:
    cached: int = 0  # answered from memory, the cache or a join
    replayed: int = 0  # answered from the killed study's receipts


class StudyCalls:
    def __init__(self, *, max_attempts: dict[str, int], retry_wait_s: float = RETRY_WAIT.default, store: Store | None = None,
                 replay: StudyReplay | None = None, on_record: OnRecord = lambda _: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.on_record = on_record
        self.counts = CallCounts()
        self.health = Health()
        self.book = Book(answer=self._answer, record=self._record,
                         record_known=self._record_known, max_attempts=max_attempts,
                         backoff=Backoff(base_s=retry_wait_s), store=store, replay=replay, clock=clock)

    def request(self, pool: str, model_key: str, messages: Messages, tag: dict[str, Any], on_done: OnDone) -> None:
        key = request_key(model_key, messages)
        self.health.ask(pool)
        self.book.ask(pool, key, messages, Owner(pool, key, tag, on_done))

    def seal(self, pool: str) -> None:
        self.health.seal(pool)
        self.book.seal(pool)

    def _answer(self, owner: Owner, reply: ModelReply | None) -> None:
        self.health.told(owner.pool, reply)  # raises once a model is known to answer nothing
        owner.done(reply)

    # -- receipts -------------------------------------------------------------------------

    def _record(self, owner: Owner, job: Job, outcome: Outcome) -> None:
        reply: ModelReply | None = outcome.output
        self._write(owner, reply, outcome.attempt, outcome.latency_s,
                    None if reply is not None else (outcome.error or "no output"), cached=False,
                    charged=outcome.charged)

    def _record_known(self, owner: Owner, reply: ModelReply | None, origin: Origin) -> None:
        if origin == "replay":
            self.counts.replayed += 1
            return  # the killed study wrote this output already
        self.counts.cached += 1
        if origin == "joined":
            return  # the call it joined records the output
        self._write(owner, reply, 0, 0.0, None if reply is not None else "no output after every attempt",
                    cached=True)

    def _write(self, owner: Owner, reply: ModelReply | None, attempt: int, latency_s: float,
               error: str | None, *, cached: bool, charged: bool = True) -> None:
        self.health.recorded(owner.pool, None if reply is not None else error)
        record = {
            "kind": "call", **owner.tag, "pool": owner.pool, "key": owner.key,
            "output": reply.text if reply else None, "truncated": reply.truncated if reply else None,
            "attempt": attempt, "cached": cached, "latency_s": round(latency_s, 6), "error": error,
        }
        if reply is None and not cached:
            record["charged"] = charged  # whether it used up an attempt (a wait did not): resume counts it
        self.on_record(record)
