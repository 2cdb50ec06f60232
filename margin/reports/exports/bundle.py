"""What every export reads: a run's results, its snapshot record, the prompts' texts, and per
transform family how many prompts of each class the family flips.

Per family, an exhaustive run knows exactly (`effectiveness`: among prompts right on the
original, those with a flipping candidate of the family). A cheapest run stops at each
prompt's first flip, so it counts the prompts whose cheapest flip is in the family: a lower
bound on the family's own flip rate, said so in every export (`family_method`).

A response run's exports say so (`target: response`) and call its texts responses where a
prompt run's call them prompts (`ExportRun.say`); where cases carry policies, each export holds
the figures and family counts per policy (`axes`, `by_policy`). A prompt run without policies
exports the bytes it always did.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.datasets.cases import POLICY_TAG
from margin.errors import InputError
from margin.reports.effectiveness import effectiveness
from margin.reports.metrics import slice_groups
from margin.reports.observations import PromptObservations
from margin.reports.snapshot_schema import Record
from margin.runfolder import RunDir
from margin.runrecord import RunRecord
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
    record: Record  # the run's snapshot record
    texts: Mapping[str, str]  # prompt id -> original text
    families: Mapping[str, str]  # transform -> family
    outcomes: Sequence[FamilyOutcome]
    family_method: str
    created: str  # ISO 8601, when the run's snapshot was made
    by_policy: Mapping[str, Sequence[FamilyOutcome]] = field(default_factory=dict)  # empty: no policies

    @property
    def results(self) -> list[SearchResult]:
        return self.run.results

    @property
    def target(self) -> str:
        """The turn the run judged and transformed: `prompt` or `response`."""
        return self.run.record.target_name

    @property
    def exhaustive(self) -> bool:
        return self.family_method == EXHAUSTIVE

    def say(self, text: str) -> str:
        """One of margin's own sentences about prompts (never one holding an id or a name from
        input), said of the run's target texts: a response run's are responses."""
        return text if self.target == "prompt" else re.sub(r"\bprompt", self.target, text)


#: The figures each export gives per policy (from the run's `policy` slices).
POLICY_FIGURES = ("balanced_margin", "unsafe_margin", "safe_margin")


def axes(bundle: ExportRun) -> dict[str, Any]:
    """What an export says of the run's axes beyond a prompt run's: `target` for a response
    run, and per policy its margins and scored and missing cases per class where the cases
    carry policies. Empty for a prompt run without policies, whose exports stay as they were."""
    out: dict[str, Any] = {}
    if bundle.target != "prompt":
        out["target"] = bundle.target
    policies = bundle.record.slices.get(POLICY_TAG) or {}
    if policies:
        out["policies"] = {name: {**{k: figures.figure(k) for k in POLICY_FIGURES},
                                  "coverage": None if figures.coverage is None else figures.coverage.document()}
                           for name, figures in policies.items()}
    return out


def policy_of(result: SearchResult) -> str | None:
    """The name of the result's case's policy (datasets.cases.policy_name), None for none."""
    return dict(result.extra).get(POLICY_TAG)


def by_policy(bundle: ExportRun, outcome: FamilyOutcome) -> dict[str, Any]:
    """A family's eligible and flipped cases per policy and class ({} without policies)."""
    out: dict[str, Any] = {}
    for name, outcomes in bundle.by_policy.items():
        found = next((o for o in outcomes if o.family == outcome.family), None)
        out[name] = {"eligible": dict(found.eligible) if found else dict.fromkeys(LABELS, 0),
                     "flipped": dict(found.flipped) if found else dict.fromkeys(LABELS, 0)}
    return out


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


def policy_outcomes(results: Sequence[SearchResult], observations: Sequence[PromptObservations],
                    families: Mapping[str, str], *, exhaustive: bool) -> dict[str, list[FamilyOutcome]]:
    """`family_outcomes` per policy (the results' `policy` slices), counted the same way."""
    out = {}
    for name, group in slice_groups(results).get(POLICY_TAG, {}).items():
        ids = {r.prompt_id for r in group}
        out[name], _ = family_outcomes(group, [o for o in observations if o.prompt_id in ids], families,
                                       exhaustive=exhaustive)
    return out


def load_bundle(run_dir: Path, dataset: Path | None = None) -> ExportRun:
    """What every export reads of the finished run in `run_dir`; `dataset` is the run's dataset
    file where it is not where run.json says."""
    from margin.reports.observations import from_receipts, read_calls
    from margin.reports.protocols import observes_all
    from margin.reports.snapshot import record, snapshot_entry
    from margin.reports.snapshot_schema import Evaluation
    from margin.runfolder import load_run
    from margin.transforms.registry import families as transform_families

    run = load_run(run_dir)
    created = snapshot_time(run_dir)
    texts = prompt_texts(run.record, dataset)
    observations = from_receipts(read_calls(run.receipts()), run.results) if run.receipts_path.is_file() else []
    exhaustive = observes_all(run.search) and bool(observations) and all(o.complete for o in observations)
    families = transform_families()
    outcomes, method = family_outcomes(run.results, observations, families, exhaustive=exhaustive)
    entry = snapshot_entry(run.guard, run.results, run.budget, Evaluation(search=run.search, seed=run.record.seed))
    per_policy = policy_outcomes(run.results, observations, families, exhaustive=exhaustive)
    return ExportRun(run, str(run_dir), record(entry, 1), texts, families, outcomes, method, created, per_policy)


def prompt_texts(record: RunRecord, dataset: Path | None) -> dict[str, str]:
    """The run's prompts by id, from its dataset (checked against the SHA-256 the run recorded)."""
    from margin.datasets import load_dataset

    loaded = load_dataset(str(dataset) if dataset is not None else record.dataset_spec, record.target_name,
                          record.policies.source if record.policies else None)
    if loaded.sha256 != record.dataset.sha256:
        raise InputError(f"not the run's dataset (SHA-256 {loaded.sha256[:12]}, the run recorded "
                         f"{record.dataset.sha256[:12]}): pass the run's own file", field="--dataset")
    return {p.id: p.text for p in loaded.prompts}


def snapshot_time(run_dir: Path) -> str:
    """When the run's snapshot was made (its date), so the same run exports the same bytes."""
    try:
        date = json.loads((run_dir / "snapshot.json").read_text("utf-8"))["meta"]["snapshot_date"]
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError("no readable snapshot.json: is the run finished?", path=run_dir / "snapshot.json") from None
    return f"{date}T00:00:00+00:00"
