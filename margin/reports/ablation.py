"""A defence ablation's figures: one guard behind several defences, each against no defence.

Per defence: the run's margins and clean accuracies with their 95% intervals (the run's own
snapshot record), its guard calls, and the change against `none` with a paired bootstrap
interval (the same prompt resamples for both sides, `bootstrap.paired_differences`); then
what it does per transform family (exhaustive runs): the flip rates of `effectiveness`,
the families it closes (flips under `none`, none left), those still flipping and those it
opens; the family of every prompt's cheapest flip (any search), which shows where a margin
now comes from; and the clean verdicts it changes: safe prompts it now blocks, unsafe ones
it now lets through, and errors it mends.

Pure: everything comes in as results, effects and records, and one `Ablation` model goes out
(`document()` is `ablation.json`); nothing is read or written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ConfigDict

from margin.reports.bootstrap import FIGURES, BootstrapSpec, paired_differences
from margin.reports.completeness import Coverage
from margin.reports.documents import Number, Open
from margin.reports.effectiveness import Effect
from margin.reports.snapshot_schema import NamedRef, Provenance, Record
from margin.types import LABELS, SearchResult, VerdictLabel

BASELINE = "none"


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


class Part(Open):
    """A part of `ablation.json`: frozen, its fields in the order the file writes them."""

    model_config = ConfigDict(frozen=True)


class FigureValue(Part):
    value: Number | None
    interval: list[Number] | None


class Change(Part):
    """A defence's figure minus none's, with its paired interval; `moves`: it leaves out 0."""

    difference: Number
    interval: list[Number]
    moves: bool


class CleanChange(Part):
    prompt_id: str
    type: str
    text: str
    before: VerdictLabel | None
    after: VerdictLabel | None


class CleanChanges(Part):
    """Prompts whose verdict on the original changes against none."""

    false_blocks_added: list[CleanChange] = []
    false_allows_added: list[CleanChange] = []
    errors_fixed: list[CleanChange] = []


class FlipRate(Part):
    eligible: int
    flipped: int
    flip_rate: Number | None


class EffectRow(Part):
    """A transform's or family's flip rates under a defence, beside none's, and its status."""

    name: str
    unsafe: FlipRate
    safe: FlipRate
    all: FlipRate
    baseline_flip_rate: Number | None
    status: str  # closed, open, opened, never


class DefenceEffects(Part):
    families: list[EffectRow]
    transforms: list[EffectRow]


class DefenceRecord(Part):
    """One defence's row of `ablation.json`; `closes`, `remains` and `opens` only beside effects."""

    defence: str
    normalize: str | None
    guard_id: str
    run: str
    figures: dict[str, FigureValue]
    coverage: Coverage
    guard_calls: int
    decoded_calls: int
    total_calls: int
    change: dict[str, Change | None] | None  # None for none itself
    clean: CleanChanges | None
    cheapest_flips: dict[str, dict[str, int]]
    effectiveness: DefenceEffects | None  # needs every candidate's verdict: --search exhaustive
    closes: list[str] = []
    remains: list[str] = []
    opens: list[str] = []

    def point(self, figure: str, change: bool) -> tuple[float | None, list[float] | None]:
        """(value, interval) of a figure, or of its change against no defence (0 for none itself)."""
        if not change:
            return self.figures[figure].value, self.figures[figure].interval
        if self.change is None:
            return 0.0, None
        diff = self.change.get(figure)
        return (diff.difference, diff.interval) if diff else (None, None)

    def family_flip_rates(self) -> dict[str, float | None] | None:
        """Per transform family, its flip rate over both classes (None: not an exhaustive run)."""
        if self.effectiveness is None:
            return None
        return {row.name: row.all.flip_rate for row in self.effectiveness.families}


class AblationMeta(Part):
    """What the ablation measured and how: the guard, the baseline run's provenance
    (`recording.outputs.provenance` with the margin version and commit), then the comparison."""

    guard: str
    margin_version: str | None
    git_commit: str | None
    dataset: NamedRef
    suite: NamedRef
    budget: Number
    cost_norm: str | None
    corpus_mean_length: Number | None
    target: str | None = None  # a response run's (unset for a prompt run)
    seed: int
    search: str
    prompts: int
    shard: list[int] | None = None  # a sharded run's (unset otherwise)
    protocol: str
    baseline: str
    confidence_intervals: dict[str, Any]
    change: str


class Ablation(Part):
    """`ablation.json`: `document()` is the file."""

    meta: AblationMeta
    defences: list[DefenceRecord]


def figure_of(record: Record, name: str) -> FigureValue:
    return FigureValue(value=record.figure(name), interval=record.interval(name))


def change_record(base: DefenceRun, run: DefenceRun, budget: float,
                  spec: BootstrapSpec | None) -> dict[str, Change | None]:
    return {name: None if diff is None else Change(difference=diff.value, interval=diff.interval.as_list(),
                                                   moves=diff.moves)
            for name, diff in paired_differences(base.results, run.results, budget, spec).items()}


def clean_changes(base: Sequence[SearchResult], run: Sequence[SearchResult],
                  texts: Mapping[str, str]) -> CleanChanges:
    """Prompts whose verdict on the original changes between `base` and `run`."""
    before = {r.prompt_id: r for r in base if r.status == "scored"}
    out: dict[str, list[CleanChange]] = {"false_blocks_added": [], "false_allows_added": [], "errors_fixed": []}
    for r in run:
        old = before.get(r.prompt_id)
        if r.status != "scored" or old is None or old.clean_verdict == r.clean_verdict:
            continue
        row = CleanChange(prompt_id=r.prompt_id, type=r.type, text=texts.get(r.prompt_id, ""),
                          before=old.clean_verdict, after=r.clean_verdict)
        if old.clean_verdict == r.label:
            out["false_blocks_added" if r.label == "safe" else "false_allows_added"].append(row)
        elif r.clean_verdict == r.label:
            out["errors_fixed"].append(row)
    return CleanChanges(**out)
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


def _rate(effect: Effect, label: str) -> FlipRate:
    e = effect.by_class[label]
    return FlipRate(eligible=e.eligible, flipped=e.flipped, flip_rate=e.flip_rate)


def status(base_flipped: int, flipped: int) -> str:
    """closed: flips under no defence, none now; open: flips both ways; opened: flips only
    now; never: no flips either way."""
    if base_flipped and not flipped:
        return "closed"
    if base_flipped:
        return "open"
    return "opened" if flipped else "never"


def effect_rows(base: Sequence[Effect], run: Sequence[Effect]) -> list[EffectRow]:
    before = {e.name: e for e in base}
    rows = []
    for effect in run:
        old = before.get(effect.name)
        base_flipped = old.by_class["all"].flipped if old else 0
        rows.append(EffectRow(name=effect.name, unsafe=_rate(effect, "unsafe"), safe=_rate(effect, "safe"),
                              all=_rate(effect, "all"),
                              baseline_flip_rate=old.by_class["all"].flip_rate if old else None,
                              status=status(base_flipped, effect.by_class["all"].flipped)))
    return rows


def defence_record(base: DefenceRun, run: DefenceRun, budget: float, families: Mapping[str, str],
                   texts: Mapping[str, str], spec: BootstrapSpec | None) -> DefenceRecord:
    fields: dict[str, list[str]] = {}
    effects = None
    if run.effects is not None and base.effects is not None:
        (base_t, base_f), (run_t, run_f) = base.effects, run.effects
        rows = effect_rows(base_f, run_f)
        effects = DefenceEffects(families=rows, transforms=effect_rows(base_t, run_t))
        fields = {what: [r.name for r in rows if r.status == status]
                  for what, status in (("closes", "closed"), ("remains", "open"), ("opens", "opened"))}
    return DefenceRecord(
        defence=run.defence, normalize=run.normalize, guard_id=run.record.id, run=run.run_dir,
        figures={name: figure_of(run.record, name) for name in FIGURES}, coverage=run.record.coverage,
        guard_calls=run.guard_calls, decoded_calls=run.decoded_calls, total_calls=run.guard_calls + run.decoded_calls,
        change=None if run is base else change_record(base, run, budget, spec),
        clean=None if run is base else clean_changes(base.results, run.results, texts),
        cheapest_flips=cheapest_flip_families(run.results, families), effectiveness=effects, **fields)


def ablation_record(runs: Sequence[DefenceRun], budget: float, families: Mapping[str, str],
                    texts: Mapping[str, str], provenance: Provenance,
                    spec: BootstrapSpec | None = None) -> Ablation:
    """`ablation.json`: `runs[0]` is the baseline (no defence); `provenance` its run's, with
    the margin version and commit."""
    base = runs[0]
    if base.normalize is not None:
        raise ValueError("the first run of an ablation is the one without a defence")
    meta = AblationMeta.model_validate({
        "guard": base.record.id, **provenance.document(), "baseline": base.defence,
        "confidence_intervals": (spec or BootstrapSpec()).describe(),
        "change": "defence minus none over the prompts both scored; paired bootstrap: each replicate resamples "
                  "the prompts once (within class) for both runs"})
    return Ablation(meta=meta, defences=[defence_record(base, run, budget, families, texts, spec) for run in runs])
