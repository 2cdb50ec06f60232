"""A circuit breaker for one remote endpoint: when it stops answering, stop sending.

Closed, every request goes out as usual. It opens when the endpoint refuses a connection
(nothing is listening), when `TRIP_AFTER` requests in a row, for more than one text, have
failed with no answer between them (every request failing: 5xx, timeouts, 429s), or when
the pool has several texts' failures in doubt and nothing left in flight to settle them.
Open, nothing is sent but one probe at a time, on a backoff schedule (0.5 s doubling to
`PROBE_CAP_S`, never sooner than a Retry-After); the first answer, the probe's or a late
one's, closes it and the endpoint gets its full concurrency back.

While the endpoint fails everything, failures are its fault, not the requests': the pool
charges them no attempt (and holds the streak's failures in doubt until the endpoint
answers another request or is found down: `StreamPool`). What ends an outage is time:
`over` says when the endpoint has answered nothing for longer than `max_outage_s`.

The breaker also keeps the endpoint's canary: a request it answered, with the caller that
sent it. Pools that share the breaker (one URL) share it, so a pool whose own requests have
all failed can still ask whether the endpoint is up, rather than take its texts' failures
for an outage while another pool's requests are answered.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Hashable, Iterable
from typing import Any

TRIP_AFTER = 8  # failed requests in a row, with no answer between, that open the breaker
FIRST_PROBE_S = 0.5
PROBE_CAP_S = 5.0


def cause(error: str | None, status: int | None, reached: bool) -> str:
    """A failure in the words an outage report uses."""
    if not reached:
        return "connection refused"
    if status is not None:
        return f"HTTP {status}"
    text = error or ""
    if text.startswith("timeout"):
        return "timeouts"
    if "Connection" in text or "Disconnected" in text:
        return "dropped connections"
    return "unreadable answers"


class Breaker:
    def __init__(self, max_outage_s: float) -> None:
        self.max_outage_s = max_outage_s
        self.open = False
        self.answered = False  # whether the endpoint has answered once in this run
        self.answered_at = float("-inf")  # monotonic: its last answer
        self.streak = 0  # failed requests since the last answer
        self.causes: Counter[str] = Counter()  # of the streak's failures
        self.keys: set[Hashable] = set()  # requests that failed in the streak (the first few)
        self.failing_since: float | None = None  # monotonic: the first failed request's start
        self.failing_since_wall: float | None = None  # the same, for the report
        self.probe_at: float | None = None
        self.probe_wait = FIRST_PROBE_S
        self.probing = False  # a probe is in flight
        self.opened = 0  # times it opened (figures)
        self.confirmed = False  # a probe failed since it opened: the endpoint itself is down
        self.canary: tuple[Any, Any] | None = None  # (caller, request): one the endpoint answered

    def answer(self, now: float) -> bool:
        """An answer came back; returns whether that closed the breaker."""
        was_open = self.open
        self.answered = True
        self.answered_at = now
        self.open = self.probing = self.confirmed = False
        self.streak = 0
        self.causes.clear()
        self.keys.clear()
        self.failing_since = self.failing_since_wall = self.probe_at = None
        self.probe_wait = FIRST_PROBE_S
        return was_open

    def failure(self, started: float, now: float, why: str, retry_after_s: float | None, *,
                probe: bool, keys: Iterable[Hashable] = ()) -> bool:
        """A request (for `keys`) failed; returns whether this opened the breaker."""
        self.streak += 1
        self.causes[why] += 1
        if len(self.keys) < TRIP_AFTER:
            self.keys.update(keys)
        if self.failing_since is None:  # since the request began, or the last answer if later
            self.failing_since = max(started, self.answered_at)
            self.failing_since_wall = time.time() - (now - self.failing_since)
        if probe:
            self.probing = False
            self.confirmed = self.confirmed or self.open
        if self.open:
            if probe:
                self._schedule(now, retry_after_s)
            return False
        # Many failures of one request alone are that request's (a text the server cannot
        # take), not an outage: a streak opens the breaker only across several requests.
        if why == "connection refused" or (self.streak >= TRIP_AFTER and len(self.keys) > 1):
            self.trip(now, retry_after_s)
            return True
        return False

    def trip(self, now: float, retry_after_s: float | None = None) -> None:
        """Open: stop sending, probe on the schedule."""
        self.open = True
        self.confirmed = False
        self.opened += 1
        self.probe_wait = FIRST_PROBE_S
        self._schedule(now, retry_after_s)

    def may_probe(self, now: float) -> bool:
        return self.open and not self.probing and self.probe_at is not None and now >= self.probe_at

    def over(self, now: float) -> bool:
        """The endpoint has answered nothing for longer than `max_outage_s`."""
        return self.open and self.failing_since is not None and now - self.failing_since > self.max_outage_s

    def deadline(self) -> float | None:
        if not self.open or self.failing_since is None:
            return None
        return self.failing_since + self.max_outage_s

    def why(self) -> list[str]:
        return [f"{what} x{n}" for what, n in self.causes.most_common()]

    def _schedule(self, now: float, retry_after_s: float | None) -> None:
        wait = self.probe_wait
        if retry_after_s is not None:
            wait = max(wait, min(retry_after_s, 30.0))
        self.probe_at = now + wait
        self.probe_wait = min(PROBE_CAP_S, self.probe_wait * 2)
