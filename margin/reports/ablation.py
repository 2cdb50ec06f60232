"""A defence ablation's figures: one guard behind several defences, each against no defence.

Per defence: the run's margins and clean accuracies with their 95% intervals (the run's own
snapshot record), its guard calls, and the change against `none` with a paired bootstrap
interval (the same prompt resamples for both sides, `bootstrap.paired_differences`); then
what it does per transform family (exhaustive runs): the flip rates of `effectiveness`,
the families it closes (flips under `none`, none left), those still flipping and those it
opens; the family of every prompt's cheapest flip (any search), which shows where a margin
now comes from; and the clean verdicts it changes: safe prompts it now blocks, unsafe ones
it now lets through, and errors it mends.

Pure: everything comes in as results, effects and records; nothing is read or written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from margin.reports.bootstrap import FIGURES, BootstrapSpec, paired_differences
from margin.reports.documents import Number, Open
from margin.reports.effectiveness import Effect
from margin.reports.snapshot_schema import Record
from margin.types import LABELS, SearchResult

BASELINE = "none"


class FigureValue(Open):
    """A figure of one defence's run with its 95% interval (`figures` in ablation.json)."""

    value: Number | None
    interval: list[Number] | None


class FigureChange(Open):
    """A figure's change against no defence with its paired 95% interval (`change`)."""

    difference: Number
    interval: list[Number]


class FlipRate(Open):
    flip_rate: Number | None  # None: no eligible prompt


class FamilyEffect(Open):
    """A family's row of a defence's `effectiveness.families` (its classes and status kept)."""

    name: str
    all: FlipRate  # both classes together


class DefenceEffects(Open):
    families: list[FamilyEffect]


class DefenceFigures(Open):
    """What the ablation figures read of one defence of ablation.json (its other fields kept)."""

    defence: str
    figures: dict[str, FigureValue]
    change: dict[str, FigureChange | None] | None  # None: the baseline itself
    effectiveness: DefenceEffects | None = None  # None: not an exhaustive run

    def family_flip_rates(self) -> dict[str, float | None] | None:
        """Per transform family, its flip rate over both classes (None: not an exhaustive run)."""
        if self.effectiveness is None:
            return None
        return {row.name: row.all.flip_rate for row in self.effectiveness.families}

    def point(self, figure: str, change: bool) -> tuple[float | None, list[float] | None]:
        """(value, interval) of a figure, or of its change against no defence (0 for none itself)."""
        if not change:
            return self.figures[figure].value, self.figures[figure].interval
        if self.change is None:
            return 0.0, None
        diff = self.change.get(figure)
        return (diff.difference, diff.interval) if diff else (None, None)


@dataclass(frozen=True)
class DefenceRun:
    """One defence's run, as the ablation reads it."""

    defence: str  # as the user named it: none, skeleton, all, nfkc+decode ...
    normalize: str | None  # its canonical name (None: no defence)
    run_dir: str
    record: Record  # the run's snapshot record: figures, intervals, coverage
    results: Sequence[SearchResult]
    effects: tuple[list[Effect], list[Effect]] | None  # `effectiveness` per transform, per family; exhaustive only
    guard_calls: int  # candidates the defended guard was asked about (results' guard_calls)
    decoded_calls: int  # further texts `decode` made the guard read for them


def figure_of(record: Record, name: str) -> dict[str, Any]:
    return {"value": record.figure(name), "interval": record.interval(name)}


def change_record(base: DefenceRun, run: DefenceRun, budget: float,
                  spec: BootstrapSpec | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, diff in paired_differences(base.results, run.results, budget, spec).items():
        out[name] = None if diff is None else {"difference": diff.value, "interval": diff.interval.as_list(),
                                               "moves": diff.moves}
    return out


def clean_changes(base: Sequence[SearchResult], run: Sequence[SearchResult],
                  texts: Mapping[str, str]) -> dict[str, list[dict[str, Any]]]:
    """Prompts whose verdict on the original changes between `base` and `run`."""
    before = {r.prompt_id: r for r in base if r.status == "scored"}
    out: dict[str, list[dict[str, Any]]] = {"false_blocks_added": [], "false_allows_added": [], "errors_fixed": []}
    for r in run:
        old = before.get(r.prompt_id)
        if r.status != "scored" or old is None or old.clean_verdict == r.clean_verdict:
            continue
        row = {"prompt_id": r.prompt_id, "type": r.type, "text": texts.get(r.prompt_id, ""),
               "before": old.clean_verdict, "after": r.clean_verdict}
        if old.clean_verdict == r.label:
            out["false_blocks_added" if r.label == "safe" else "false_allows_added"].append(row)
        elif r.clean_verdict == r.label:
            out["errors_fixed"].append(row)
    return out


def cheapest_flip_families(results: Sequence[SearchResult], families: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Per class: how many prompts have their cheapest flip in each family (plus `original`
    for prompts whose original verdict is already wrong, `none within budget` for capped)."""
    out: dict[str, dict[str, int]] = {}
    for label in LABELS:
        counts: Counter[str] = Counter()
        for r in results:
            if r.status != "scored" or r.label != label:
                continue
            if r.flip_cost == 0:
                counts["original"] += 1
            elif r.flip is None:
                counts["none within budget"] += 1
            else:
                counts[families.get(r.flip.transform, r.flip.transform)] += 1
        out[label] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


def _rates(effect: Effect) -> dict[str, Any]:
    return {label: {"eligible": e.eligible, "flipped": e.flipped, "flip_rate": e.flip_rate}
            for label, e in effect.by_class.items()}


def status(base_flipped: int, flipped: int) -> str:
    """closed: flips under no defence, none now; open: flips both ways; opened: flips only
    now; never: no flips either way."""
    if base_flipped and not flipped:
        return "closed"
    if base_flipped:
        return "open"
    return "opened" if flipped else "never"


def effect_rows(base: Sequence[Effect], run: Sequence[Effect]) -> list[dict[str, Any]]:
    before = {e.name: e for e in base}
    rows = []
    for effect in run:
        old = before.get(effect.name)
        base_flipped = old.by_class["all"].flipped if old else 0
        rows.append({"name": effect.name, **_rates(effect),
                     "baseline_flip_rate": old.by_class["all"].flip_rate if old else None,
                     "status": status(base_flipped, effect.by_class["all"].flipped)})
    return rows


def defence_record(base: DefenceRun, run: DefenceRun, budget: float, families: Mapping[str, str],
                   texts: Mapping[str, str], spec: BootstrapSpec | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "defence": run.defence,
        "normalize": run.normalize,
        "guard_id": run.record.id,
        "run": run.run_dir,
        "figures": {name: figure_of(run.record, name) for name in FIGURES},
        "coverage": run.record.coverage.document(),
        "guard_calls": run.guard_calls,
        "decoded_calls": run.decoded_calls,
        "total_calls": run.guard_calls + run.decoded_calls,
        "change": None if run is base else change_record(base, run, budget, spec),
        "clean": None if run is base else clean_changes(base.results, run.results, texts),
        "cheapest_flips": cheapest_flip_families(run.results, families),
    }
    if run.effects is None or base.effects is None:
        out["effectiveness"] = None  # needs every candidate's verdict: --search exhaustive
        return out
    (base_t, base_f), (run_t, run_f) = base.effects, run.effects
    rows = effect_rows(base_f, run_f)
    out["effectiveness"] = {"families": rows, "transforms": effect_rows(base_t, run_t)}
    out["closes"] = [r["name"] for r in rows if r["status"] == "closed"]
    out["remains"] = [r["name"] for r in rows if r["status"] == "open"]
    out["opens"] = [r["name"] for r in rows if r["status"] == "opened"]
    return out


def ablation_record(runs: Sequence[DefenceRun], budget: float, families: Mapping[str, str],
                    texts: Mapping[str, str], meta: Mapping[str, Any],
                    spec: BootstrapSpec | None = None) -> dict[str, Any]:
    """`ablation.json`: `runs[0]` is the baseline (no defence)."""
    base = runs[0]
    if base.normalize is not None:
        raise ValueError("the first run of an ablation is the one without a defence")
    return {"meta": {**meta, "baseline": base.defence,
                     "confidence_intervals": (spec or BootstrapSpec()).describe(),
                     "change": "defence minus none over the prompts both scored; paired bootstrap: each "
                               "replicate resamples the prompts once (within class) for both runs"},
            "defences": [defence_record(base, run, budget, families, texts, spec) for run in runs]}
