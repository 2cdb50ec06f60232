"""What every export reads: a run's results, its snapshot record, the prompts' texts, and per
transform family how many prompts of each class the family flips.

Per family, an exhaustive run knows exactly (`effectiveness`: among prompts right on the
original, those with a flipping candidate of the family). A cheapest run stops at each
prompt's first flip, so it counts the prompts whose cheapest flip is in the family: a lower
bound on the family's own flip rate, said so in every export (`family_method`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from margin.reports.effectiveness import effectiveness
from margin.reports.observations import PromptObservations
from margin.runfolder import RunDir
from margin.types import LABELS, SearchResult

EXHAUSTIVE = "exhaustive: among prompts right on the original, those with a flipping candidate of the family"
CHEAPEST = ("cheapest flip: among prompts right on the original, those whose cheapest flip is in the family "
            "(a lower bound on the family's own flip rate; --search exhaustive gives it exactly)")


@dataclass(frozen=True, slots=True)
class FamilyOutcome:
    family: str
    eligible: dict[str, int]  # per class: prompts right on the original
    flipped: dict[str, int]  # per class: of those, flipped by the family

    @property
    def total_eligible(self) -> int:
        return sum(self.eligible.values())

    @property
    def total_flipped(self) -> int:
        return sum(self.flipped.values())

    @property
    def flip_rate(self) -> float:
        return self.total_flipped / self.total_eligible if self.total_eligible else 0.0


@dataclass(frozen=True)
class ExportRun:
    run: RunDir
    source: str  # the run folder as the user named it
    record: Mapping[str, Any]  # the run's snapshot record
    texts: Mapping[str, str]  # prompt id -> original text
    families: Mapping[str, str]  # transform -> family
    outcomes: Sequence[FamilyOutcome]
    family_method: str
    created: str  # ISO 8601, when the run's snapshot was made

    @property
    def results(self) -> list[SearchResult]:
        return self.run.results


def _from_effects(observations: Sequence[PromptObservations], families: Mapping[str, str]) -> list[FamilyOutcome]:
    _, per_family = effectiveness(observations, families)
    return [FamilyOutcome(e.name, {label: e.by_class[label].eligible for label in LABELS},
                          {label: e.by_class[label].flipped for label in LABELS}) for e in per_family]


def _from_cheapest(results: Sequence[SearchResult], seen: set[str], families: Mapping[str, str]) -> list[FamilyOutcome]:
    right = [r for r in results if r.status == "scored" and r.flip_cost]
    eligible: dict[str, int] = {label: sum(1 for r in right if r.label == label) for label in LABELS}
    flips: dict[str, dict[str, int]] = {}
    for r in right:
        if r.flip is not None:
            family = families.get(r.flip.transform, r.flip.transform)
            flips.setdefault(family, dict.fromkeys(LABELS, 0))[r.label] += 1
    names = sorted(seen | set(flips))
    return [FamilyOutcome(f, dict(eligible), flips.get(f, dict.fromkeys(LABELS, 0))) for f in names]


def family_outcomes(results: Sequence[SearchResult], observations: Sequence[PromptObservations],
                    families: Mapping[str, str], *, exhaustive: bool) -> tuple[list[FamilyOutcome], str]:
    """Per family (sorted by name), eligible and flipped prompts per class, and how they were counted."""
    if exhaustive:
        return _from_effects(observations, families), EXHAUSTIVE
    seen = {families.get(v.transform, v.transform) for o in observations for v in o.variants}
    return _from_cheapest(results, seen, families), CHEAPEST
