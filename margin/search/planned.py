"""A prompt search written as one plan: a generator that yields rounds of candidates and
reads their verdicts, with the tools such a plan shares (ask within a call budget, test an
edit set, minimise a flipping set by group testing, prune it).

The driver sees a PromptSearch like any other: it asks for candidates, never calls a guard,
and is deterministic given its verdicts, so a plan replays from its verdict log (which is how
it crosses a process boundary: a generator cannot be pickled).
"""

from __future__ import annotations

import itertools
from abc import abstractmethod
from collections.abc import Generator, Iterator, Sequence
from dataclasses import replace
from typing import Any

from margin.cost import CostModel
from margin.reports.metrics import ONE_EDIT_TAG
from margin.search.candidates import Candidates
from margin.search.edits import ADAPTIVE, Op, apply_ops, format_script
from margin.search.single_edits import certified_edits
from margin.search.stacks import additions, ranked_per_word, stacks
from margin.search.strategies import PromptSearch
from margin.search.sweep import OneEditSweep
from margin.types import Candidate, Flip, Prompt, SearchResult, Verdict

Asks = Generator[list[Candidate], None, Any]
#: certifying (`_ask_every_one_edit`): the first round's size, doubling up to CERTIFY_ROUND, so a
#: flip early in the sweep's order costs few calls and asking all ~1,400 takes few rounds.
SWEEP_ROUND_FIRST = 4
CERTIFY_ROUND = 64
#: stacks of single edits (`_stack`) asked a round: most flips take two or three words
STACK_ROUND = 2
#: `_grow`: how many edits it adds to the strongest one, one round each (a stack of up to 4)
GROW_LAYERS = 3


class OutOfCalls(Exception):
    """The prompt's guard-call budget is spent."""


class PlannedSearch(PromptSearch):
    """Subclasses write `_plan` and call `_start()` at the end of their `__init__`; `args` are
    their constructor's keyword arguments, kept to rebuild the search from its log."""

    def __init__(self, prompt: Prompt, original: Candidate, candidates: Sequence[Candidate] | Candidates,
                 budget: float, *, cost_model: CostModel, seed: int, max_calls: int,
                 args: dict[str, Any]) -> None:
        super().__init__(prompt, original, candidates, budget)
        if max_calls < 2:
            raise ValueError("max_calls must be at least 2 (the original and one candidate)")
        self._args = args
        self.cost_model = cost_model
        self.seed = seed
        self.max_calls = max_calls
        self.text = prompt.text
        self.unit = cost_model.cost(prompt.text, prompt.text + " ")  # the cost of one edit
        self.issued: list[Candidate] = []  # in the order asked: decides ties deterministically
        self.by_text: dict[str, Verdict | None] = {}
        self.built: dict[tuple[Op, ...], Candidate] = {}
        self.queue: list[Candidate] = []
        self.waiting: set[Candidate] = set()
        self.log: list[tuple[Candidate, Verdict | None]] = []
        self.finished = False
        self.gains: dict[Op, float] = {}  # single edits asked so far: how far each moved the guard toward a flip
        self._sweep: OneEditSweep | None = None  # made when first needed: most prompts never sweep
        self.call_limit = max_calls  # raised only by `_ask_every_one_edit`, whose calls have their own budget

    def _start(self) -> None:
        self.plan = self._plan()
        self._advance()

    @abstractmethod
    def _plan(self) -> Asks: ...

    # -- the PromptSearch protocol -------------------------------------------------------

    def next_requests(self, limit: int) -> list[Candidate]:
        out = self.queue[:limit]
        del self.queue[:limit]
        self.requested.update(out)
        return out

    def receive(self, candidate: Candidate, verdict: Verdict | None) -> None:
        if candidate not in self.waiting:
            raise RuntimeError(f"{self.prompt.id!r} did not ask about {candidate.strength!r}")
        self.waiting.discard(candidate)
        self.verdicts[candidate] = verdict
        self.by_text[candidate.text] = verdict
        self.log.append((candidate, verdict))
        self._advance()

    @property
    def done(self) -> bool:
        return self.finished

    def result(self) -> SearchResult:
        if not self.done:
            raise RuntimeError(f"search for {self.prompt.id!r} is not done")
        clean = self.by_text.get(self.text)
        base = SearchResult(
            prompt_id=self.prompt.id, label=self.prompt.label, type=self.prompt.type,
            clean_verdict=clean.label if clean else None, flip_cost=None, capped=False, flip=None,
            guard_calls=len(self.issued), status="missing", extra=self.prompt.extra,
        )
        if clean is None:
            return base
        if clean.is_wrong_for(self.prompt.label):
            return replace(base, status="scored", flip_cost=0.0, extra=self._tagged(True))
        best = self.best()
        certified = self._tagged(self.one_edit_certified())
        if best is None:
            return replace(base, status="scored", flip_cost=self.budget, capped=True, extra=certified)
        verdict = self.by_text[best.text]
        assert verdict is not None and best.transform is not None and best.strength is not None
        flip = Flip(best.transform, best.strength, best.seed, best.cost, verdict.label, best.text)
        return replace(base, status="scored", flip_cost=best.cost, flip=flip, extra=certified)

    def _tagged(self, minimal: bool) -> tuple[tuple[str, str], ...]:
        """The prompt's tags and ONE_EDIT_TAG: `minimal` when the cost is certified minimal
        among one-edit flips, else `upper-bound` (results.jsonl's tags; `margin report`)."""
        return tuple(sorted((*self.prompt.extra, (ONE_EDIT_TAG, "minimal" if minimal else "upper-bound"))))

    def best(self) -> Candidate | None:
        """The cheapest flipping candidate within budget; ties go to the one asked first."""
        flips = [c for c in self.issued if c.text != self.text and self._flips(c.text) and c.cost <= self.budget]
        return min(flips, key=lambda c: c.cost) if flips else None

    def __reduce__(self) -> tuple[Any, ...]:
        # A generator cannot be pickled, but the search is a function of its verdicts: ship
        # the arguments and the verdicts so far, and replay them on the other side.
        pending = tuple(c for c in self.issued if c in self.waiting and c not in self.queue)
        return (_restore, (type(self), self._args, tuple(self.log), pending))

    # -- plumbing --------------------------------------------------------------------------

    def _advance(self) -> None:
        while not self.finished and not self.queue and not self.waiting:
            try:
                batch = next(self.plan)
            except StopIteration:
                self.finished = True
                return
            self.queue = list(batch)
            self.waiting = set(batch)

    def _flips(self, text: str) -> bool:
        verdict = self.by_text.get(text)
        return verdict is not None and verdict.is_wrong_for(self.prompt.label)

    def _candidate(self, ops: Sequence[Op]) -> Candidate:
        key = tuple(sorted(ops))
        if key not in self.built:
            text = apply_ops(self.text, key, self.seed)
            self.built[key] = Candidate(self.prompt.id, ADAPTIVE, format_script(key), self.seed, text,
                                        self.cost_model.cost(self.text, text))
        return self.built[key]

    def _ask(self, candidates: Sequence[Candidate]) -> Asks:
        """Ask for the candidates whose texts have no verdict yet (at most the calls left);
        return every candidate's verdict (None: missing, or not asked for want of calls)."""
        fresh: dict[str, Candidate] = {}
        for c in candidates:
            if c.text not in self.by_text and c.text not in fresh:
                fresh[c.text] = c
        new = list(fresh.values())
        room = self.call_limit - len(self.issued)
        if new and room <= 0:
            raise OutOfCalls
        new = new[:room]
        if new:
            self.issued.extend(new)
            yield new
        return [self.by_text.get(c.text) for c in candidates]

    def _original_is_right(self) -> Asks:
        """Ask for the original; return whether its verdict is right (else c_i is 0 or it is
        missing, and there is no flip to look for)."""
        (clean,) = yield from self._ask([self.original])
        return clean is not None and not clean.is_wrong_for(self.prompt.label)

    def _test(self, ops: Sequence[Op]) -> Asks:
        """Does editing `ops` flip the verdict? (The original, for no ops, is known.)"""
        if not ops:
            return self._flips(self.text)
        candidate = self._candidate(ops)
        yield from self._ask([candidate])
        return self._flips(candidate.text)

    def _at_floor(self) -> bool:
        best = self.best()
        return best is not None and best.cost <= self.unit + 1e-9

    def _toward_flip(self, verdict: Verdict | None) -> float:
        """How close a verdict is to flipping this prompt (higher is closer)."""
        if verdict is None or verdict.p_unsafe is None:
            return float("-inf")
        return verdict.p_unsafe if self.prompt.label == "safe" else 1.0 - verdict.p_unsafe

    # -- one-edit variants -------------------------------------------------------------------

    def _sweep_one_edits(self, limit: int, round_size: int, seeded: bool = True,
                         give_up: tuple[int, float] | None = None) -> Asks:
        """Ask one-edit variants (`single_edits`) best first by what the guard has shown
        (`sweep`): a probe in every word not yet measured, then rounds of the likeliest,
        until one flips at one edit's cost or `limit` calls are spent. `seeded`: words whose
        knock-out was asked start at its move (else they are probed like the rest).
        `give_up` (n, closeness): stop once n variants are asked and none came closer to
        flipping than that (`_toward_flip`: the p_unsafe of a safe prompt, 1 - it of an unsafe one)."""
        if self._sweep is None:
            self._sweep = OneEditSweep(self.text)
            for op, gain in self.gains.items() if seeded else ():
                self._sweep.measured(op.start, gain)
        yield from self._sweep_rounds(limit, itertools.repeat(round_size), give_up)

    def _sweep_rounds(self, limit: int, sizes: Iterator[int], give_up: tuple[int, float] | None = None) -> Asks:
        """The sweep's rounds: its probes, then the likeliest variants, a round of the next of
        `sizes` each time, until one flips at one edit's cost, none is left, `limit` calls are
        spent or `give_up` (see `_sweep_one_edits`) says stop."""
        base = self._toward_flip(self.by_text.get(self.text))
        sweep, spent = self._sweep, 0
        assert sweep is not None
        rounds = [sweep.probes()]
        while spent < limit and not sweep.complete and not self._at_floor():
            if give_up and sweep.asked >= give_up[0] and base + sweep.best_move < give_up[1]:
                return
            size = next(sizes)
            batch = (rounds.pop() if rounds else sweep.next(size))[: limit - spent]
            before = len(self.issued)
            verdicts = yield from self._ask([self._candidate([e.op]) for e in batch])
            spent += len(self.issued) - before
            for edit, verdict in zip(batch, verdicts, strict=True):
                if self._candidate([edit.op]).text in self.by_text:  # asked (not cut for want of calls)
                    move = self._toward_flip(verdict) - base
                    sweep.record(edit, move)
                    self.gains.setdefault(edit.op, move)

    def _ask_every_one_edit(self) -> Asks:
        """Certify the cost among one-edit flips: ask every variant of the certified set
        (`certified_edits`: the typo-sized edits and every edit transform's single edit at
        every position) not asked yet, best first (`sweep`) in rounds that double up to
        CERTIFY_ROUND, until one flips at one edit's cost (nothing is cheaper) or none is
        left. Its own budget, beside max_calls: one call per variant not yet asked, so a
        prompt costs at most max_calls plus its variants."""
        if self._sweep is None:
            self._sweep = OneEditSweep(self.text)
        self._sweep.extend(certified_edits(self.text, self.seed))
        left = len(self._sweep.pending)
        self.call_limit = len(self.issued) + left  # so no round is cut: every variant left is asked
        doubling = (min(SWEEP_ROUND_FIRST << n, CERTIFY_ROUND) for n in itertools.count())
        yield from self._sweep_rounds(left, doubling)

    def one_edit_certified(self) -> bool:
        """Is the cost found minimal among one-edit flips? Yes when it is one edit's cost
        (no edit costs less), or when every variant the sweep holds was judged: the
        typo-sized ones (`one_edits`), and with `--one-edit all` the certified set."""
        if self._at_floor():
            return True
        if self._sweep is None or not self._sweep.complete:  # the sweep is what asks them all
            return False
        return all(self.by_text.get(apply_ops(self.text, [e.op], self.seed)) is not None for e in self._sweep.word)

    def _stack(self, grow: bool = False) -> Asks:
        """Ask stacks of the strongest measured single edits, one per word (`stacks`), fewest
        words first, STACK_ROUND a round, only those cheaper than the best flip so far; keep
        the fewest edits of the first that flips. An edit's strength is its move per unit of
        cost (a stack costs the sum of its edits), so a swap, two units, must move twice as far
        as a deletion. Nothing is asked without measured moves (a guard without scores).
        `grow`: if none flips, grow a stack greedily (`_grow`)."""
        per_unit = {op: gain * self.unit / self._candidate([op]).cost for op, gain in self.gains.items()}
        tries = [s for s in stacks(per_unit, self.text) if self._candidate(s).cost < self._ceiling() - 1e-9]
        for first in range(0, len(tries), STACK_ROUND):
            batch = tries[first : first + STACK_ROUND]
            yield from self._ask([self._candidate(s) for s in batch])
            flipping = [s for s in batch if self._flips(self._candidate(s).text)]
            if flipping:
                kept = yield from self._minimise([], flipping[0])
                yield from self._prune(kept)
                return
        if grow:
            yield from self._grow(per_unit)

    def _grow(self, gains: dict[Op, float]) -> Asks:
        """Grow a stack as TextBugger does, by the guard's answers rather than single moves:
        from the strongest edit, ask each of its `additions` on top (one round, only those
        cheaper than the best flip so far) and keep the one that brings the guard closest to a
        flip, GROW_LAYERS times; at the first round with a flip, keep the cheapest, minimised
        and pruned. Edits do not add up exactly (two may each move the guard and together
        not), which is why the answers lead here."""
        ranked = ranked_per_word(gains, self.text)
        stack = [ranked[0][0]] if ranked else []
        for _ in range(GROW_LAYERS if stack else 0):
            ceiling = self._ceiling()
            tries = [[*stack, op] for op in additions(stack, ranked, self.text)
                     if self._candidate([*stack, op]).cost < ceiling - 1e-9]
            if not tries:
                return
            verdicts = yield from self._ask([self._candidate(t) for t in tries])
            flipping = [t for t in tries if self._flips(self._candidate(t).text)]
            if flipping:
                kept = yield from self._minimise([], min(flipping, key=lambda t: self._candidate(t).cost))
                yield from self._prune(kept)
                return
            closeness = [self._toward_flip(v) for v in verdicts]
            stack = tries[max(range(len(tries)), key=lambda i: (closeness[i], -i))]

    # -- group testing ----------------------------------------------------------------------

    def _pair_floor(self, atoms: Sequence[Op]) -> float:
        """A lower bound on the cost of any two of `atoms` (edits apart cost their sum)."""
        costs = sorted(self._candidate([a]).cost for a in atoms)
        return costs[0] + costs[1] if len(costs) > 1 else float("inf")

    def _ceiling(self) -> float:
        """The cost to beat: the best flip's so far (infinite before any)."""
        best = self.best()
        return best.cost if best is not None else float("inf")

    def _minimise(self, base: list[Op], items: list[Op], ceiling: float = float("inf"), *,
                  gallop: bool = True) -> Asks:
        """A subset M of `items` with base + M flipping, given that base + items flips: find
        the shortest flipping prefix, keep its last item, and recurse on the items before it.
        The prefix is found by galloping (1, 2, 4, ... items) then bisection, which is quick
        when the items that matter come first (a good ranking), or by bisection alone
        (`gallop=False`), quicker when they may lie anywhere. None once base + M could not
        cost less than `ceiling` (the best flip so far): no call is spent on a set that cannot win."""
        if base and self._candidate(base).cost >= ceiling - 1e-9:
            return None
        if not items or (base and (yield from self._test(base))):
            return []
        if min(self._candidate([*base, item]).cost for item in items) >= ceiling - 1e-9:
            return None  # base does not flip, and adding any one item already costs too much
        failing, passing = 0, len(items)  # base + items[:failing] does not flip; base + items[:passing] does
        k = 1
        while gallop and k < passing:
            if (yield from self._test(base + items[:k])):
                passing = k
                break
            failing = k
            k *= 2
        while passing - failing > 1:
            mid = (failing + passing) // 2
            if (yield from self._test(base + items[:mid])):
                passing = mid
            else:
                failing = mid
        last = items[passing - 1]
        rest = yield from self._minimise([*base, last], items[: passing - 1], ceiling, gallop=gallop)
        return None if rest is None else [*rest, last]

    def _prune(self, kept: list[Op]) -> Asks:
        """Drop edits one at a time, least likely first, while the rest still flips."""
        kept = list(kept)
        for op in list(reversed(kept)):
            if len(kept) > 1:
                trial = [o for o in kept if o != op]
                if (yield from self._test(trial)):
                    kept = trial
        return kept


def _restore(cls: type[PlannedSearch], args: dict[str, Any], log: Sequence[tuple[Candidate, Verdict | None]],
             pending: Sequence[Candidate]) -> PlannedSearch:
    search = cls(**args)
    for candidate, verdict in log:
        _hand_out(search, candidate)
        search.receive(candidate, verdict)
    for candidate in pending:
        _hand_out(search, candidate)
    return search


def _hand_out(search: PlannedSearch, candidate: Candidate) -> None:
    if candidate not in search.queue:
        raise RuntimeError(f"replay of {search.prompt.id!r} diverged at {candidate.strength!r}")
    search.queue.remove(candidate)
    search.requested.add(candidate)
