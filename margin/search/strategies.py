"""Search strategies: per-prompt state machines that ask for verdicts and decide c_i.

A strategy never calls a guard. A driver asks it for up to `limit` candidates to query
(`next_requests`), hands back each verdict (`receive`, None meaning missing after retries)
and reads `result` once `done`. The same objects run in-process or under the Ray engine,
and since they are deterministic given their verdicts, a run replayed from its receipts
reaches the same results.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace

from margin.search.candidates import Candidates, Fixed
from margin.types import Candidate, Flip, Prompt, SearchResult, Verdict

#: `cheapest` asks for max(1, GROWTH * verdicts so far) candidates at a time: its last round
#: passes the first flip by at most that share of the calls before it.
WINDOW_GROWTH = 1 / 16
MAX_WINDOW = 64


class PromptSearch(ABC):
    """Shared bookkeeping: the original first, then the candidates in cost order (a list, or
    a `Ladder` that builds them only as far as the search reads)."""

    def __init__(self, prompt: Prompt, original: Candidate, candidates: Sequence[Candidate] | Candidates,
                 budget: float):
        self.prompt = prompt
        self.original = original
        self.ladder: Candidates = Fixed(candidates) if isinstance(candidates, Sequence) else candidates
        self.budget = budget
        self.verdicts: dict[Candidate, Verdict | None] = {}
        self.requested: set[Candidate] = set()
        self._settled = 0  # candidates[:_settled] hold verdicts that are neither missing nor flips
        self._offered = 0  # candidates[:_offered] have all been requested

    @property
    def candidates(self) -> list[Candidate]:
        """The candidates built so far (all of them once the search has needed them all)."""
        return self.ladder.built

    def all_candidates(self) -> list[Candidate]:
        return self.ladder.all()

    @property
    def calls(self) -> int:
        """Distinct candidates asked for, the original included."""
        return len(self.requested)

    def _take(self, pool: list[Candidate], limit: int) -> list[Candidate]:
        out: list[Candidate] = []
        for candidate in pool:
            if len(out) >= limit:
                break
            if candidate not in self.requested:
                self.requested.add(candidate)
                out.append(candidate)
        return out

    def _take_candidates(self, limit: int) -> list[Candidate]:
        """The next `limit` candidates in order, from a cursor (candidates are distinct and
        never the original, so none was asked for before)."""
        start = self._offered
        if not self.ladder.reach(start + limit):
            limit = len(self.ladder.built) - start
        out = self.ladder.built[start:start + limit]
        self._offered = start + len(out)
        self.requested.update(out)
        return out

    def receive(self, candidate: Candidate, verdict: Verdict | None) -> None:
        self.verdicts[candidate] = verdict

    @property
    def clean(self) -> Verdict | None:
        return self.verdicts.get(self.original)

    @property
    def clean_known(self) -> bool:
        return self.original in self.verdicts

    @abstractmethod
    def next_requests(self, limit: int) -> list[Candidate]: ...

    def window(self) -> int:
        """How many candidates the driver should ask for at a time: as many as it likes, by
        default (exhaustive needs every candidate; adaptive queues only what it plans)."""
        return MAX_WINDOW

    @property
    @abstractmethod
    def done(self) -> bool: ...

    def decide(self) -> tuple[str, Candidate | None]:
        """Scan candidates in cost order: ('flip', c), ('capped', None), ('missing', None)
        or ('pending', None) when an answer needed to decide has not arrived."""
        # Verdicts are final once received, so the scan resumes where the last one stopped
        # (a full rescan per call is quadratic in the suite size).
        built, verdicts = self.ladder.built, self.verdicts
        while self._settled < len(built) or self.ladder.reach(self._settled + 1):
            candidate = built[self._settled]
            if candidate not in verdicts:
                return "pending", None
            verdict = verdicts[candidate]
            if verdict is None:
                return "missing", None
            if verdict.is_wrong_for(self.prompt.label):
                return "flip", candidate
            self._settled += 1
        return "capped", None

    def result(self) -> SearchResult:
        if not self.done:
            raise RuntimeError(f"search for {self.prompt.id!r} is not done")
        clean = self.clean
        missing = SearchResult(
            prompt_id=self.prompt.id, label=self.prompt.label, type=self.prompt.type,
            clean_verdict=clean.label if clean else None, flip_cost=None, capped=False, flip=None,
            guard_calls=self.calls, status="missing", extra=self.prompt.extra,
        )
        if clean is None:
            return missing
        if clean.is_wrong_for(self.prompt.label):
            return replace(missing, status="scored", flip_cost=0.0)
        state, candidate = self.decide()
        if state == "missing":
            return missing
        if state == "capped":
            return replace(missing, status="scored", flip_cost=self.budget, capped=True)
        assert candidate is not None and candidate.transform is not None and candidate.strength is not None
        verdict = self.verdicts[candidate]
        assert verdict is not None
        flip = Flip(candidate.transform, candidate.strength, candidate.seed, candidate.cost,
                    verdict.label, candidate.text)
        return replace(missing, status="scored", flip_cost=candidate.cost, flip=flip)


class CheapestSearch(PromptSearch):
    """Ascending cost, a few at a time, stopping at the first flip.

    Exact over the suite: done only once every candidate cheaper than the flip has a
    verdict, so c_i equals what `exhaustive` finds.
    """

    def window(self) -> int:
        return max(1, min(MAX_WINDOW, int(len(self.verdicts) * WINDOW_GROWTH)))

    def next_requests(self, limit: int) -> list[Candidate]:
        if self.original not in self.requested:
            return self._take([self.original], 1)
        if not self.clean_known or self.done:
            return []
        return self._take_candidates(limit)

    @property
    def done(self) -> bool:
        if not self.clean_known:
            return False
        clean = self.clean
        if clean is None or clean.is_wrong_for(self.prompt.label):
            return True
        return self.decide()[0] != "pending"


class ExhaustiveSearch(PromptSearch):
    """Every candidate, even when the original is already wrong: per-transform
    effectiveness, invariance and threshold sweeps need all of them."""

    def next_requests(self, limit: int) -> list[Candidate]:
        if not self.requested:
            self.ladder.all()  # it needs them all: built in one go, while this prompt's work is at hand
        first = self._take([self.original], limit)
        return first + self._take_candidates(limit - len(first))

    @property
    def done(self) -> bool:
        return self.ladder.complete and len(self.verdicts) == len(self.ladder.built) + 1
