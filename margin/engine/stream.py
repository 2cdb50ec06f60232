"""A remote endpoint: requests stream, many in flight, with no batch barrier.

Each request holds only its own slot: a slow or hung one delays nobody else. The pool

- keeps up to the adaptive concurrency limit in flight (`ConcurrencyLimit`: backs off on
  429 / 503, recovers on success) and at most `requests_per_second` starting per second;
- bounds every request by `timeout_s`: past it, that request is an attempt without output;
- hedges: a request still unanswered after `hedge_after_s` (by default 3 x the p95 latency
  seen so far, at least 1 s) gets a second copy; the first answer wins and the other copy
  is cancelled and recorded as such. Hedges that lose (the first copy answered first) are
  capped at a tenth of the requests (plus a few), so a server slow for everyone is not
  sent twice the load; a hedge that wins (its first copy hung) does not count against the
  cap, so however many requests hang, each is hedged;
- reports each failure's HTTP status and Retry-After to the book, which retries it after a
  jittered backoff, not sooner than the server asked. A failure that was not a tried
  attempt (429, 503 with Retry-After, a refused connection) is charged no attempt;
- pauses the endpoint when it stops answering (`Breaker`): one probe at a time until it
  answers, no attempts charged meanwhile; past `max_outage_s` it raises `EndpointDown`,
  and an endpoint that refuses its first connections raises `EndpointUnreachable`. The
  probe is a request the endpoint answered before (its canary, shared by the pools on one
  URL) where there is one: if the canary is answered, the endpoint is up and the failures
  that paused it were the texts' own (a server that rejects or drops some texts), charged
  as attempts; if the canary fails too, the endpoint is down and nothing is charged. A
  canary's answer is a health check only, never recorded.

Whose fault a failure that reached the server was (5xx, timeout, dropped connection,
unreadable body) is decided by what the endpoint does after it: it is held in doubt until
the endpoint answers any request (of this pool or another on the same URL: charged, the
text's own) or a probe fails too (uncharged, an outage). So a text the server drops every
time uses up its attempts and ends missing while the endpoint answers others, however
often its failures pause the endpoint.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict, deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from margin.engine.book import Book, Outcome, Ticket
from margin.engine.breaker import Breaker, cause
from margin.engine.calls import CallResult, StreamCaller, call_remote
from margin.engine.limits import ConcurrencyLimit, EndpointLimits, RateLimit
from margin.engine.pool import OnCall, Pool, _ignore
from margin.errors import EndpointDown, EndpointUnreachable

HEDGE_FLOOR_S = 1.0
HEDGE_FACTOR = 3.0
HEDGE_SAMPLES = 16  # latencies seen before "auto" hedges at all
HEDGE_SHARE = 0.1  # hedges at most this share of the requests started, plus HEDGE_SPARE
HEDGE_SPARE = 8
LATENCY_WINDOW = 128  # the latest answers whose p95 sets "auto" hedges: a slow start is soon forgotten


@dataclass(eq=False)
class Request:
    tickets: list[Ticket]
    started: float
    task: asyncio.Task[Any] | None = None
    hedged: bool = False  # a copy of it was sent
    cancelled: bool = False
    copy: bool = False  # it is a hedge
    probe: bool = False  # sent while the breaker was open
    canary: bool = False  # a health probe: a request answered before, sent for no ticket


def share_breakers(pools: Sequence[Pool]) -> None:
    """Pools whose requests go to the same endpoint (a study's models and judges on one
    server) share its breaker: one outage, one probe at a time, one deadline."""
    by_url: dict[str, Breaker] = {}
    for pool in pools:
        if isinstance(pool, StreamPool):
            pool.breaker = by_url.setdefault(pool.url, pool.breaker)


class StreamPool(Pool):
    def __init__(self, name: str, caller: StreamCaller, limits: EndpointLimits, *, owns: bool = True,
                 on_call: OnCall = _ignore, url: str | None = None) -> None:
        """`url`: the endpoint, as outage reports name it (default: the pool's name)."""
        super().__init__(name, "stream", on_call)
        self.caller = caller
        self.url = url or name
        self.breaker = Breaker(limits.max_outage_s)
        self.hedges_won = 0  # hedges that answered while their first copy still ran
        # Failures in doubt, with when they failed: the endpoint has answered nothing since.
        # Charged once it answers another request (they were the requests' own), uncharged
        # once it is found down (a probe failed too, or it never answered at all).
        self.held: list[tuple[float, Outcome]] = []
        self.deciding = False  # failures held until the canary says whose they were
        self.owns = owns
        self.limits = limits
        self.concurrency = ConcurrencyLimit(limits.max_concurrency)
        self.rate: RateLimit | None = None
        self.requests: set[Request] = set()
        self.by_key: dict[Hashable, list[Request]] = defaultdict(list)
        self.recent: deque[float] = deque(maxlen=LATENCY_WINDOW)
        self.started_requests = 0
        self._p95: tuple[int, float] = (0, 0.0)  # (samples seen when computed, p95)
        self._seen = 0
        self.figures.capacity = caller.request_size

    @property
    def inflight(self) -> int:
        return len(self.requests)

    @property
    def appetite(self) -> int:
        return self.limits.max_concurrency * max(1, self.caller.request_size)

    def dispatch(self, book: Book, now: float) -> None:
        if self.rate is None:
            self.rate = RateLimit(self.limits.requests_per_second, now)
        if self.breaker.open:
            if self.breaker.canary is not None:
                if self.breaker.may_probe(now) and self.rate.take(now):
                    self.breaker.probing = True
                    self._send([], now, probe=True)
            elif self.breaker.may_probe(now) and book.queued(self.name) and self.rate.take(now):
                tickets = book.take(self.name, self.caller.request_size)
                if tickets:
                    self.breaker.probing = True
                    self._send(tickets, now, probe=True)
            return
        while self.concurrency.room(len(self.requests)) > 0:
            if not book.queued(self.name) or not self.rate.take(now):
                return
            tickets = book.take(self.name, self.caller.request_size)
            if not tickets:
                return
            self._send(tickets, now)

    def complete(self, book: Book, token: Any, now: float) -> None:
        request: Request = token
        self._forget(request)
        if request.cancelled:
            return  # its outcome went to the book when it was cancelled
        assert request.task is not None
        result = request.task.result()
        latency = now - request.started
        if request.probe:
            self.breaker.probing = False
        answered = any(out is not None for out in result.outputs)
        if request.canary:
            if answered:
                self.breaker.answer(now)
                self.concurrency.reset()
            else:
                self._failed(book, request, result, now)
            return
        charged = True
        if answered:
            for ticket, output in zip(request.tickets, result.outputs, strict=True):
                if output is not None:
                    self.breaker.canary = (self.caller, ticket.request)
            if self.breaker.answer(now):
                self.concurrency.reset()  # answering again: full concurrency at once
            self._release(book, charged=True)
            if all(out is not None for out in result.outputs):
                self.concurrency.succeeded(len(self.requests))
                self.recent.append(latency)
                self._seen += 1
                self.figures.latencies.append(latency)
        elif result.retry:
            charged = self._failed(book, request, result, now)
        if result.overload:
            self.figures.overloads += 1
            self.concurrency.overloaded()
            self.figures.lowest_limit = self.concurrency.lowest
        if result.errors and all(e is not None and e.startswith("timeout") for e in result.errors):
            self.figures.timeouts += 1
        outcomes: list[Outcome] = []
        for ticket, output, error in zip(request.tickets, result.outputs, result.errors, strict=True):
            if output is not None:
                cancelled = self._cancel_copies(ticket.key, now, winner=ticket.attempt)
                self.hedges_won += bool(cancelled) and request.copy
                outcomes += cancelled
            outcomes.append(Outcome(ticket.key, ticket.attempt, output, latency, error, result.retry_after_s,
                                    result.retry, charged))
        if not answered and charged and result.retry:
            self.held += [(now, outcome) for outcome in outcomes]  # in doubt until the endpoint answers
        else:
            book.deliver(outcomes)
        self.figures.calls += 1
        self.figures.requests += len(request.tickets)
        self.figures.call_s += latency
        self.on_call(len(request.tickets), self.caller.request_size, latency)

    def _failed(self, book: Book, request: Request, result: CallResult, now: float) -> bool:
        """A request the endpoint gave no answer to: tell the breaker; returns whether it
        may use up an attempt (one that was tried and failed, unless the endpoint is known
        to be down: it is held until the endpoint answers another request or is found down)."""
        breaker = self.breaker
        wait = result.status == 429 or (result.status == 503 and result.retry_after_s is not None)
        why = cause(result.errors[0] if result.errors else None, result.status, result.reached)
        if breaker.failure(request.started, now, why, result.retry_after_s, probe=request.probe,
                           keys=(t.key for t in request.tickets)):
            self.figures.pauses += 1
            if not breaker.answered and why == "connection refused":
                who = self.url if self.name == self.url else f"{self.name} at {self.url}"
                raise EndpointUnreachable(f"{who} refused the connection: is the server running, and is "
                                          f"the URL right? ({result.errors[0]})")
            if breaker.canary is None:
                self._release(book, charged=False)  # the streak was the endpoint's fault, not theirs
                return False
            self.deciding = True  # the canary decides whose fault the streak was
        if wait or not result.reached:
            return False  # not tried: the server asked to wait, or was never reached
        # Open and never answered, or a probe failed too: the endpoint is down. Open on a
        # guess (a streak): the canary decides, so a text failing while it is out is still
        # charged when the endpoint turns out to be up.
        return not (breaker.open and (breaker.canary is None or breaker.confirmed))

    def _release(self, book: Book, *, charged: bool, until: float = float("inf")) -> None:
        """Deliver the held failures that failed by `until`, charged or not."""
        keep = [(at, outcome) for at, outcome in self.held if at > until]
        done = [outcome._replace(charged=charged) for at, outcome in self.held if at <= until]
        self.held = keep
        if done:
            book.deliver(done)

    def tick(self, book: Book, now: float) -> None:
        breaker = self.breaker
        if self.held:
            if breaker.open and breaker.confirmed:
                self._release(book, charged=False)  # a probe failed too: the endpoint is down
            else:
                # The endpoint answered since they failed (this pool's request, the canary or
                # another pool's on the same URL): the failures were the texts' own.
                self._release(book, charged=True, until=breaker.answered_at)
        if self.deciding and (not breaker.open or breaker.confirmed or not self.held):
            self.deciding = False  # the canary (or another answer) has decided
        if self.held and not self.requests and not self.deciding:
            # Nothing in flight can settle them. Several texts failing with no answer between
            # is the endpoint failing: pause it, and let the canary say whose fault they were.
            # One text failing alone is its own failure.
            several = len({outcome.key for _, outcome in self.held}) > 1
            if several and not breaker.open:
                breaker.trip(now)
                self.figures.pauses += 1
            if breaker.open and breaker.canary is not None and not breaker.confirmed:
                self.deciding = True  # the canary decides whose fault they were
            else:
                self._release(book, charged=not breaker.open)
        if self.breaker.over(now):
            b = self.breaker
            assert b.failing_since_wall is not None
            raise EndpointDown(self.url, b.failing_since_wall, b.why(), b.max_outage_s)
        after = self._hedge_after()
        if after is None or self.breaker.open:
            return
        for request in list(self.requests):
            if request.hedged or now - request.started < after:
                continue
            if self.concurrency.room(len(self.requests)) <= 0 or not self._may_hedge():
                return
            request.hedged = True
            copies = [t for t in (book.hedge(t.key) for t in request.tickets) if t is not None]
            if copies:
                self.figures.hedges += 1
                self._send(copies, now, hedge=True)

    def next_timer(self, book: Book, now: float) -> float | None:
        times = []
        if (deadline := self.breaker.deadline()) is not None:
            times.append(deadline)
            if (self.breaker.probe_at is not None and not self.breaker.probing
                    and (book.queued(self.name) or self.breaker.canary is not None)):
                times.append(self.breaker.probe_at)
        after = self._hedge_after()
        if after is not None and self._may_hedge() and not self.breaker.open:
            times += [r.started + after for r in self.requests if not r.hedged]
        if self.rate is not None and book.queued(self.name):
            next_token = self.rate.next_at(now)
            if next_token is not None:
                times.append(next_token)
        return min(times) if times else None

    async def aclose(self) -> None:
        for request in list(self.requests):
            if request.task is not None:
                request.task.cancel()
        tasks = [r.task for r in self.requests if r.task is not None]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self.owns:
            await self.caller.aclose()

    # -- inside ---------------------------------------------------------------------------

    def _send(self, tickets: list[Ticket], now: float, *, hedge: bool = False, probe: bool = False) -> None:
        # No tickets: a probe that sends the canary (a copy is never copied again).
        canary = not tickets
        request = Request(tickets, now, hedged=hedge, copy=hedge, probe=probe, canary=canary)
        caller, payload = self.caller, [t.request for t in tickets]
        if canary:  # the endpoint's canary, through the caller that sent it (maybe another pool's)
            assert self.breaker.canary is not None
            caller, one = self.breaker.canary
            payload = [one]
        self.figures.canaries += canary
        coro = call_remote(caller, payload, self.limits.timeout_s)
        request.task = asyncio.get_running_loop().create_task(coro)
        request.task.add_done_callback(lambda _: self.notify(request))
        self.requests.add(request)
        for ticket in tickets:
            self.by_key[ticket.key].append(request)
        self.started_requests += 1

    def _forget(self, request: Request) -> None:
        self.requests.discard(request)
        for ticket in request.tickets:
            copies = self.by_key.get(ticket.key)
            if copies is not None and request in copies:
                copies.remove(request)
                if not copies:
                    del self.by_key[ticket.key]

    def _cancel_copies(self, key: Hashable, now: float, winner: int) -> list[Outcome]:
        """Other copies of a request that has just been answered: cancelled, recorded."""
        outcomes = []
        for other in list(self.by_key.get(key, ())):
            if other.cancelled or other.task is None or other.task.done() or len(other.tickets) != 1:
                continue  # a finished copy reports itself; a shared request carries others' texts
            other.cancelled = True
            other.task.cancel()
            ticket = other.tickets[0]
            outcomes.append(Outcome(ticket.key, ticket.attempt, None, now - other.started,
                                    f"cancelled: attempt {winner} answered first"))
        return outcomes

    def _hedge_after(self) -> float | None:
        setting = self.limits.hedge_after_s
        if setting is None:
            return None
        if setting != "auto":
            return float(setting)
        if len(self.recent) < HEDGE_SAMPLES:
            return None
        seen, p95 = self._p95
        if self._seen - seen >= HEDGE_SAMPLES or not seen:  # recomputed every few answers, not every tick
            ordered = sorted(self.recent)
            p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
            self._p95 = (self._seen, p95)
        return max(HEDGE_FLOOR_S, HEDGE_FACTOR * p95)

    def _may_hedge(self) -> bool:
        """Hedges that did not win stay under a tenth of the requests (plus a few)."""
        return self.figures.hedges - self.hedges_won < HEDGE_SHARE * self.started_requests + HEDGE_SPARE
