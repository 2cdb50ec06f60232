"""The request book on its own: one call per key, joins, memory, replay, retries with backoff
that honours Retry-After, hedges and requeues, with a hand-driven clock (no pool, no waits)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from margin.engine.book import Backoff, Book, Outcome


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Store:
    def __init__(self, items: dict[str, Any] | None = None) -> None:
        self.items = dict(items or {})
        self.puts: list[tuple[str, Any]] = []

        self.lookups: list[list[str]] = []

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        self.lookups.append(keys)
        return {k: self.items[k] for k in keys if k in self.items}

    def put_many(self, items: Any) -> None:
        self.puts += list(items)


class Replay:
    def __init__(self, outputs: dict[str, Any], failed: dict[str, int], waits: dict[str, int] | None = None) -> None:
        self.outputs, self.failed, self.waits = outputs, failed, waits or {}

    def output(self, key: str) -> Any:
        return self.outputs.get(key)

    def failed_attempts(self, key: str) -> int:
        return self.failed.get(key, 0)

    def uncharged(self, key: str) -> int:
        return self.waits.get(key, 0)


def make(**kwargs: Any) -> tuple[Book, dict[str, list[Any]], Clock]:
    seen: dict[str, list[Any]] = {"answers": [], "records": [], "known": []}
    clock = Clock()
    book = Book(answer=lambda owner, out: seen["answers"].append((owner, out)),
                record=lambda owner, job, outcome: seen["records"].append((owner, outcome)),
                record_known=lambda owner, out, origin: seen["known"].append((owner, out, origin)),
                clock=clock, **kwargs)
    return book, seen, clock


def test_a_key_is_sent_once_and_later_askers_join_or_read_memory():
    store = Store()
    book, seen, _ = make(store=store)
    book.ask("p", "a", "request a", "first")
    book.ask("p", "a", "request a", "second")  # joins the queued one
    book.ask("p", "b", "request b", "third")
    tickets = book.take("p", 10)
    assert [(t.key, t.request, t.attempt) for t in tickets] == [("a", "request a", 1), ("b", "request b", 1)]
    book.deliver([Outcome("a", 1, "A", 0.1), Outcome("b", 1, "B", 0.1)])
    assert seen["answers"] == [("first", "A"), ("second", "A"), ("third", "B")]
    assert seen["known"] == [("second", "A", "joined")]
    assert [owner for owner, _ in seen["records"]] == ["first", "third"]  # one record per attempt
    book.ask("p", "a", "request a", "fourth")  # answered from memory, told at the next pump
    assert book.finished and seen["answers"][-1] == ("fourth", "A")
    assert seen["known"][-1] == ("fourth", "A", "memo")
    assert store.puts == [("a", "A"), ("b", "B")] and book.stats.sent == 2


def test_the_store_is_asked_once_for_every_key_asked_since_the_last_look():
    store = Store({"b": "B", "d": "D"})
    book, seen, _ = make(store=store)
    for key in "abcd":
        book.ask("p", key, f"request {key}", key)
    book.ask("p", "a", "request a", "a again")  # joins a's job before any look-up
    assert book.backlog("p") == 4 and not store.lookups
    tickets = book.take("p", 10)
    assert store.lookups == [["a", "b", "c", "d"]]  # one query, in the order asked
    assert [t.key for t in tickets] == ["a", "c"]
    assert seen["known"] == [("b", "B", "cache"), ("d", "D", "cache")]
    assert seen["answers"] == [("b", "B"), ("d", "D")]
    book.deliver([Outcome("a", 1, "A", 0.1), Outcome("c", 1, "C", 0.1)])
    assert ("a again", "A") in seen["answers"] and book.finished
    book.ask("p", "b", "request b", "later")  # now remembered: no second look-up
    assert book.finished and store.lookups == [["a", "b", "c", "d"]]


def test_memory_is_bounded_and_a_forgotten_key_is_asked_again():
    book, seen, _ = make(memory=2)
    for key in "abcde":
        book.ask("p", key, key, key)
        (ticket,) = book.take("p", 10)
        book.deliver([Outcome(key, 1, key.upper(), 0.0)])
    assert len(book.memo) <= 2 * 2 and "e" in book.memo and "a" not in book.memo
    book.ask("p", "e", "e", "again")
    assert book.finished and seen["known"][-1] == ("again", "E", "memo")
    book.ask("p", "a", "a", "once more")  # forgotten: sent again
    assert [t.key for t in book.take("p", 10)] == ["a"]


def test_no_output_is_retried_with_jittered_backoff_then_missing():
    book, seen, clock = make(max_attempts=3, backoff=Backoff(base_s=1.0, cap_s=30.0))
    book.ask("p", "k", "r", "owner")
    for attempt, ceiling in ((1, 1.0), (2, 2.0)):
        (ticket,) = book.take("p", 5)
        assert ticket.attempt == attempt
        book.deliver([Outcome("k", attempt, None, 0.0, "HTTP 500")])
        due = book.next_due()
        assert book.take("p", 5) == [] and due is not None
        assert clock.now + ceiling / 2 <= due <= clock.now + ceiling  # equal jitter
        clock.now = due
    (ticket,) = book.take("p", 5)
    book.deliver([Outcome("k", 3, None, 0.0, "HTTP 500")])
    assert seen["answers"] == [("owner", None)] and book.finished and book.stats.missing == 1
    assert [o.attempt for _, o in seen["records"]] == [1, 2, 3]
    book.ask("p", "k", "r", "late")  # a missing key is not asked again in this run
    assert book.finished and seen["known"][-1] == ("late", None, "memo")


def test_retry_after_is_honoured_and_a_hopeless_error_is_not_retried():
    book, seen, clock = make(max_attempts=5, backoff=Backoff(base_s=0.01, cap_s=60.0))
    book.ask("p", "slow", "r", "a")
    book.ask("p", "bad", "r", "b")
    book.take("p", 5)
    book.deliver([Outcome("slow", 1, None, 0.0, "429", retry_after_s=7.0),
                  Outcome("bad", 1, None, 0.0, "401 bad key", retry=False)])
    assert book.next_due() == pytest.approx(7.0)  # not before what the server asked
    assert seen["answers"] == [("b", None)]  # no second attempt could help it
    assert Backoff(base_s=0.01, cap_s=5.0).delay(1, 60.0, random.Random(0)) == 5.0  # capped


@given(st.integers(1, 12), st.floats(0.01, 10.0), st.floats(0.5, 100.0), st.integers(0, 2**32))
def test_backoff_grows_exponentially_within_its_cap(retry, base, cap, seed):
    wait = Backoff(base, cap).delay(retry, None, random.Random(seed))
    ceiling = min(cap, base * 2 ** (retry - 1))
    assert ceiling / 2 <= wait <= ceiling


def test_replayed_outputs_answer_without_a_call_and_failed_attempts_continue():
    replay = Replay({"done": "D"}, {"half": 1, "gave-up": 3})
    book, seen, _ = make(max_attempts=3, replay=replay)
    for key in ("done", "half", "gave-up"):
        book.ask("p", key, key, key)
    book.pump()
    assert seen["answers"] == [("done", "D")] and seen["known"] == [("done", "D", "replay")]
    assert [(t.key, t.attempt) for t in book.take("p", 5)] == [("half", 2), ("gave-up", 4)]
    book.deliver([Outcome("half", 2, None, 0.0, "x"), Outcome("gave-up", 4, None, 0.0, "x")])
    # `half` continues the killed run's attempts (2 of 3 used); `gave-up` got a fresh set of 3
    assert [(t.key, t.attempt) for t in book.take("p", 5)] == []
    assert len(book.waiting) == 2


@pytest.mark.parametrize(("last", "waits", "left"), [
    (2, 2, 3),  # two waits: nothing used up, all three left (as an uninterrupted run gives)
    (2, 1, 2),  # a wait and a failure: two left
    (2, 0, 1),  # two failures (or lines from before receipts said which): one left
    (5, 5, 3),  # more waits than attempts: still all three
    (4, 1, 3),  # three failures: it gave up, a fresh set
])
def test_a_replayed_key_keeps_the_attempts_its_waits_did_not_use_up(last, waits, left):
    book, seen, _ = make(max_attempts=3, backoff=Backoff(0.0, 0.0), replay=Replay({}, {"k": last}, {"k": waits}))
    book.ask("p", "k", "r", "owner")
    sent = []
    while not seen["answers"]:  # every send fails, charged, until the key is missing
        (ticket,) = book.take("p", 5)
        sent.append(ticket.attempt)
        book.deliver([Outcome("k", ticket.attempt, None, 0.0, "HTTP 500")])
    assert sent == list(range(last + 1, last + 1 + left))  # attempt numbers continue


def test_a_failed_copy_while_another_runs_is_recorded_as_using_up_nothing():
    book, seen, _ = make(max_attempts=2, backoff=Backoff(0.0, 0.0))
    book.ask("p", "k", "r", "owner")
    book.take("p", 1)
    book.hedge("k")
    book.deliver([Outcome("k", 2, None, 0.0, "timeout")])  # attempt 1 still runs
    book.deliver([Outcome("k", 1, None, 0.0, "timeout")])  # the last copy: this failure counts
    assert [(o.attempt, o.charged) for _, o in seen["records"]] == [(2, False), (1, True)]


def test_a_hedge_is_one_more_attempt_and_the_first_answer_wins():
    book, seen, _ = make(max_attempts=1)
    book.ask("p", "k", "r", "owner")
    (first,) = book.take("p", 1)
    copy = book.hedge("k")
    assert copy is not None and copy.attempt == 2  # the hedge does not use up the one real attempt
    book.deliver([Outcome("k", 1, None, 5.0, "cancelled: attempt 2 answered first"), Outcome("k", 2, "V", 0.1)])
    assert seen["answers"] == [("owner", "V")] and book.finished
    assert book.hedge("k") is None  # answered: nothing to hedge
    assert book.stats.sent == 2 and book.stats.hedges == 1


def test_a_failed_copy_waits_for_the_other_and_requeue_is_uncharged():
    book, seen, _ = make(max_attempts=2, backoff=Backoff(0.0, 0.0))
    book.ask("p", "k", "r", "owner")
    (first,) = book.take("p", 1)
    book.hedge("k")
    book.deliver([Outcome("k", 2, None, 0.0, "timeout")])
    assert not book.waiting and not seen["answers"]  # attempt 1 is still running
    book.deliver([Outcome("k", 1, None, 0.0, "timeout")])
    (retry,) = book.take("p", 1)  # both failed: a retry (the hedge raised the limit to 3)
    assert retry.attempt == 3
    book.requeue([retry])  # its actor was replaced before it ran
    (again,) = book.take("p", 1)
    assert again.attempt == 3 and book.stats.sent == 3


def test_pools_have_their_own_queues_and_attempt_limits():
    book, seen, _ = make(max_attempts={"guard": 1, "model": 2})
    book.ask("guard", "g", "r", "o1")
    book.ask("model", "m", "r", "o2")
    assert [t.key for t in book.take("model", 9)] == ["m"] and book.queued("guard") == 1
    book.deliver([Outcome("m", 1, None, 0.0, "x")])
    assert book.busy("model") and book.waiting  # one more attempt for the model
    (g,) = book.take("guard", 9)
    book.deliver([Outcome("g", 1, None, 0.0, "x")])
    assert ("o1", None) in seen["answers"]  # the guard pool allows one attempt
    with pytest.raises(ValueError):
        make(max_attempts=0)


def test_a_local_batch_whose_wake_up_is_lost_still_completes(monkeypatch):
    """The loop looks at a running batch once a second: a lost wake-up costs a second."""
    import time

    from margin.engine.local import LOOK_EVERY_S, LocalPool
    from margin.engine.loop import run_pools

    class Echo:
        max_batch_size = 4

        def call(self, requests):
            return [r.upper() for r in requests]

        def close(self):
            pass

    monkeypatch.setattr(LocalPool, "watch", lambda self, future, token: None)  # every wake-up lost
    book, seen, _ = make()
    book.clock = time.monotonic
    for key in "abcdef":
        book.ask("p", key, key, key)
    began = time.monotonic()
    run_pools(book, [LocalPool("p", Echo, max_batch_size=4)], clock=time.monotonic)
    assert sorted(seen["answers"]) == [(k, k.upper()) for k in "abcdef"]
    assert time.monotonic() - began < 2 * LOOK_EVERY_S + 1.5  # two batches, one look each


def test_a_wait_uses_up_no_attempt():
    book, seen, clock = make(max_attempts=1, backoff=Backoff(base_s=1.0, cap_s=30.0))
    book.ask("p", "a", "request a", "owner")
    for attempt in (1, 2, 3):  # the server keeps asking to wait: never missing
        (ticket,) = book.take("p", 10)
        assert ticket.attempt == attempt
        book.deliver([Outcome("a", attempt, None, 0.1, "429", retry_after_s=2.0, charged=False)])
        assert not seen["answers"] and book.next_due() is not None and book.next_due() >= clock.now + 2.0
        clock.now = book.next_due()
    assert book.stats.waits == 3
    (ticket,) = book.take("p", 10)
    book.deliver([Outcome("a", ticket.attempt, None, 0.1, "HTTP 500")])  # charged, and the only one
    assert seen["answers"] == [("owner", None)] and book.stats.missing == 1
