"""Whether a result rests on complete evidence (docs/design.md, "Coverage").

A run's coverage, per class: prompts scored out of the prompts it set out to score (total),
prompts missing (no output after every retry: never scored), and prompts whose flip cost an
`invalid` output decided (counted wrong, so scored, but a figure built on unparseable outputs
reads differently). A run is complete when nothing is missing; the reason of an incomplete
one is the first missing prompt's recorded error. `margin publish` ranks a run only when each
class's coverage reaches its `--min-coverage` (all of it, by default).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from margin.reports.documents import Open
from margin.types import LABELS, SearchResult

#: What a prompt with no recorded error is missing for (a merge that no input covered, a
#: rescore of verdicts that never held one).
NO_RECORD = "no verdict recorded"


def decided_by_invalid(result: SearchResult) -> bool:
    """Whether an `invalid` output set this prompt's flip cost (on the original, or as its flip)."""
    return result.status == "scored" and (
        result.clean_verdict == "invalid" or (result.flip is not None and result.flip.verdict == "invalid"))


def class_counts(results: Sequence[SearchResult]) -> dict[str, dict[str, int]]:
    """Per class: prompts scored, missing, their total, and those an `invalid` output decided."""
    out: dict[str, dict[str, int]] = {"scored": {}, "missing": {}, "total": {}, "invalid": {}}
    for label in LABELS:
        rs = [r for r in results if r.label == label]
        out["scored"][label] = sum(r.status == "scored" for r in rs)
        out["missing"][label] = sum(r.status == "missing" for r in rs)
        out["total"][label] = len(rs)
        out["invalid"][label] = sum(decided_by_invalid(r) for r in rs)
    return out


class Coverage(Open):
    """A snapshot record's `coverage` and its rules. A record written before `total`,
    `invalid` or `complete` were (an older snapshot) leaves them unset: the rules derive what
    they need from `scored` and `missing`, and the record is written back as it was read."""

    scored: dict[str, int]
    missing: dict[str, int]
    total: dict[str, int] | None = None
    invalid: dict[str, int] | None = None
    complete: bool | None = None
    reason: str | None = None

    @classmethod
    def of(cls, results: Sequence[SearchResult], reason: str | None) -> Coverage:
        """The class counts of a run's results, whether it is complete and why not (`reason`:
        what the first missing prompt's receipts say, `missing_reason`)."""
        counts = class_counts(results)
        complete = not any(counts["missing"].values())
        return cls(**counts, complete=complete, reason=None if complete else (reason or NO_RECORD))

    def totals(self) -> dict[str, int]:
        """Prompts per class (scored + missing in a snapshot written before `total` was recorded)."""
        if self.total:
            return dict(self.total)
        return {k: self.scored.get(k, 0) + self.missing.get(k, 0) for k in LABELS}

    def shares(self) -> dict[str, float]:
        """Scored / total per class that has prompts (a class with none is left out)."""
        total = self.totals()
        return {label: self.scored.get(label, 0) / total[label] for label in LABELS if total.get(label)}

    def is_complete(self) -> bool:
        return not any(self.missing.values())

    def meets(self, min_coverage: float) -> bool:
        """Each class's coverage at least `min_coverage` (a share 0..1)."""
        return self.is_complete() or all(s >= min_coverage for s in self.shares().values())

    def scored_of_total(self) -> str:
        """`unsafe 24/24, safe 0/24`: prompts scored of the total, per class."""
        total = self.totals()
        return ", ".join(f"{label} {self.scored.get(label, 0)}/{total.get(label, 0)}" for label in self.shares())

    def describe(self) -> str:
        """One line: `unsafe 24/24 (100.0%), safe 0/24 (0.0%) scored, 24 missing, 3 invalid; reason: ...`."""
        total = self.totals()
        parts = [f"{label} {self.scored.get(label, 0)}/{total.get(label, 0)} ({100 * share:.1f}%)"
                 for label, share in self.shares().items()]
        text = ", ".join(parts) + " scored"
        missing, invalid = sum(self.missing.values()), sum((self.invalid or {}).values())
        text += f", {missing} missing" + (f", {invalid} decided by invalid outputs" if invalid else "")
        if self.reason:
            text += f"; first error: {self.reason}"
        return text


def missing_reason(lines: Iterable[Mapping[str, Any]], results: Sequence[SearchResult]) -> str | None:
    """The cause recorded for the first missing prompt (in the results' order): the error of
    its last call attempt without output. None when nothing is missing."""
    missing = [r.prompt_id for r in results if r.status == "missing"]
    if not missing:
        return None
    wanted = set(missing)
    last: dict[str, str] = {}
    for line in lines:
        if line.get("kind") == "call" and line.get("verdict") is None and line.get("error") \
                and line.get("prompt_id") in wanted:
            last[str(line["prompt_id"])] = str(line["error"])
    first = missing[0]
    return f"prompt {first}: {last.get(first, NO_RECORD)}"


# ---- a paired study's pairs -----------------------------------------------------------------

PAIR_KINDS = ("guard_verdicts", "responses", "judge_outputs")

#: The per-transformation counts of missing outputs every pairings file has held.
MISSING_COUNTS = ("original_missing", "transformed_missing", "response_missing", "judge_missing")


class PairCoverage(Open):
    """A pair's `coverage` and its rules: per kind of output (guard verdicts, responses, judge
    outputs) how many were asked for and how many are missing, whether nothing is, and the
    first recorded error. A pairings file written before pairs recorded one reads as what its
    per-transformation counts show (`PairRecord.known_coverage`): nothing asked, incomplete."""

    asked: dict[str, int]
    missing: dict[str, int]
    complete: bool
    reason: str | None = None

    @classmethod
    def of(cls, asked: Mapping[str, int], missing: Mapping[str, int], reason: str | None) -> PairCoverage:
        """The counts of each kind (0 where not given), complete when none is missing, and
        why not (`reason`, or NO_RECORD)."""
        complete = not any(missing.get(k, 0) for k in PAIR_KINDS)
        return cls(asked={k: int(asked.get(k, 0)) for k in PAIR_KINDS},
                   missing={k: int(missing.get(k, 0)) for k in PAIR_KINDS},
                   complete=complete, reason=None if complete else (reason or NO_RECORD))

    @classmethod
    def from_counts(cls, lost: int) -> PairCoverage | None:
        """What an older pairings file's transformations show: `lost` outputs missing over
        them (None when none is), with no share known."""
        if not lost:
            return None
        return cls(asked={}, missing={}, complete=False,
                   reason=f"{lost} missing outputs counted over its transformations (a pairings file without coverage)")

    def shares(self) -> dict[str, float]:
        """Obtained / asked per kind that was asked for (a kind with none asked is left out)."""
        return {k: (self.asked[k] - self.missing.get(k, 0)) / self.asked[k] for k in PAIR_KINDS if self.asked.get(k)}

    def is_complete(self) -> bool:
        return self.complete

    def meets(self, min_coverage: float) -> bool:
        """Each kind of output at least `min_coverage` (a share 0..1) of what was asked; an
        incomplete pair whose shares are unknown (an older file's) never does."""
        if self.complete:
            return True
        shares = self.shares()
        return bool(shares) and all(s >= min_coverage for s in shares.values())

    def describe(self) -> str:
        """One line: `responses 45/48 (93.8%) obtained; first error: ...` (only what is short)."""
        parts = [f"{k.replace('_', ' ')} {self.asked[k] - self.missing[k]}/{self.asked[k]} ({100 * share:.1f}%)"
                 for k, share in self.shares().items() if self.missing.get(k)]
        text = ", ".join(parts) + " obtained" if parts else "incomplete"
        if self.reason:
            text += f"; first error: {self.reason}"
        return text
