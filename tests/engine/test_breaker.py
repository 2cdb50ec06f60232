"""The circuit breaker on its own, with a hand-driven clock: when it opens, how it probes,
what closes it, and when an outage is over the limit."""

from __future__ import annotations

from margin.engine.breaker import FIRST_PROBE_S, PROBE_CAP_S, TRIP_AFTER, Breaker, cause


def test_a_refused_connection_opens_it_at_once_and_an_answer_closes_it():
    breaker = Breaker(max_outage_s=60)
    breaker.answer(now=0.0)
    assert breaker.failure(1.0, 1.5, "connection refused", None, probe=False)
    assert breaker.open and not breaker.may_probe(1.5) and breaker.may_probe(1.5 + FIRST_PROBE_S)
    breaker.probing = True
    assert not breaker.may_probe(100.0)  # one probe at a time
    assert not breaker.failure(2.0, 2.0, "connection refused", None, probe=True)
    assert breaker.probe_at == 2.0 + 2 * FIRST_PROBE_S  # the schedule doubles
    assert breaker.why() == ["connection refused x2"] and breaker.failing_since == 1.0
    assert breaker.answer(now=3.0) and not breaker.open and breaker.failing_since is None


def test_a_streak_of_failures_opens_it_and_a_retry_after_delays_the_probe():
    breaker = Breaker(max_outage_s=60)
    for i in range(TRIP_AFTER - 1):
        assert not breaker.failure(float(i), float(i), "HTTP 500", None, probe=False, keys=[f"key {i}"])
    assert breaker.failure(10.0, 10.0, "HTTP 429", 7.0, probe=False, keys=["key 0"])
    assert breaker.probe_at == 17.0
    for n in range(10):  # probes back off to the cap
        breaker.failure(20.0 + n, 20.0 + n, "HTTP 500", None, probe=True)
    assert breaker.probe_at is not None and breaker.probe_at - 29.0 == PROBE_CAP_S


def test_one_text_failing_again_and_again_is_not_an_outage():
    breaker = Breaker(max_outage_s=60)
    for i in range(3 * TRIP_AFTER):
        assert not breaker.failure(float(i), float(i), "HTTP 500", None, probe=False, keys=["poison"])
    assert not breaker.open
    assert breaker.failure(99.0, 99.0, "HTTP 500", None, probe=False, keys=["another"])


def test_the_outage_is_over_the_limit_only_while_nothing_answers():
    breaker = Breaker(max_outage_s=10)
    breaker.answer(now=5.0)
    breaker.failure(4.0, 6.0, "connection refused", None, probe=False)  # began before the last answer
    assert breaker.failing_since == 5.0 and breaker.deadline() == 15.0
    assert not breaker.over(15.0) and breaker.over(15.1)
    breaker.answer(now=16.0)
    assert not breaker.over(100.0) and breaker.deadline() is None


def test_causes_read_as_an_outage_report_says_them():
    assert cause("APIConnectionError: ... (ConnectError: refused)", None, reached=False) == "connection refused"
    assert cause("RateLimitError: Error code: 429", 429, reached=True) == "HTTP 429"
    assert cause("timeout: no answer within 120 s", None, reached=True) == "timeouts"
    assert cause("APIConnectionError: Connection error.", None, reached=True) == "dropped connections"
    assert cause("JSONDecodeError: Expecting value", None, reached=True) == "unreadable answers"
