"""Tables for a finished study: one row per pair, then each pair's evidence per transformation."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from rich.table import Table

from margin.reports.pairings import Pairings, PairTransformation
from margin.studies.rates import StackLayers

STATUS_CELLS = {"bypass_found": "[red]bypass found[/red]", "no_bypass_found": "[green]none found[/green]",
                "incomplete": "[yellow]incomplete[/yellow] (outputs missing)"}


class SecondJudge(BaseModel):
    """What a transformation's `second_judge` evidence says that the table shows."""

    model_config = ConfigDict(frozen=True)

    preservation: float | None
    agreement: float | None


class Evidence(BaseModel):
    """A study's evidence for one transformation (`rates.outcome`) that the tables read beyond
    `PairTransformation`'s own (intervals, defined rates, missing outputs): the pairings keep it
    as the transformation's extra fields."""

    model_config = ConfigDict(frozen=True)

    counts: dict[str, int]
    layers: StackLayers | None = None
    second_judge: SecondJudge | None = None

    @classmethod
    def of(cls, row: PairTransformation) -> Evidence:
        return cls.model_validate(row.model_extra or {})


def _rate(value: float | None, interval: list[float] | None, defined: bool = True) -> str:
    if not defined or value is None:
        return "—"
    text = f"{100 * value:.1f}"
    return text + (f" ({100 * interval[0]:.0f}–{100 * interval[1]:.0f})" if interval else "")


def pairs_table(pairings: Pairings) -> Table:
    models = {m.id: m for m in pairings.meta.models}
    t = pairings.meta.thresholds
    table = Table(title=f"paired study: a transformation qualifies at evasion ≥ {100 * t.evasion:g}%, "
                        f"regression ≤ {100 * t.regression:g}%, preservation ≥ {100 * t.preservation:g}%")
    for column in ("guard", "model", "capability", "status", "qualifying / tested"):
        table.add_column(column, justify="right" if column in ("capability", "qualifying / tested") else "left")
    for pair in pairings.data:
        model = models[pair.model_id]
        capability = model.capability_index if "capability_index" in model.model_fields_set else "—"
        shown = pair.shown_status()
        table.add_row(pair.guard_id, pair.model_id, f"{capability}",
                      STATUS_CELLS[shown] + ("" if pair.is_complete() or shown == "incomplete" else " (incomplete)"),
                      f"{pair.qualifying_transformations} / {pair.transformations_tested}")
    return table


#: how the table names each layer that may stop an attempt (`margin.studies.rates.LAYERS`)
LAYER_NAMES = {"input_guard": "input guard", "output_guard": "output guard", "judge": "judge", "none": "none (bypass)"}


def stopped_by(layers: StackLayers) -> str:
    """Which layer stopped the attempts: `input guard 4, judge 2 of 6`; layers that stopped none
    left out."""
    parts = [f"{LAYER_NAMES[layer]} {n}" for layer, n in layers.stopped_by.items() if n]
    if layers.missing:
        parts.append(f"missing {layers.missing}")
    return f"{', '.join(parts) or '—'} of {layers.attempts}"


def evidence_tables(pairings: Pairings) -> list[Table]:
    """Per pair: rates in % with 95% Wilson intervals, qualification and coverage; for a guard
    stack with an output guard, which layer stopped the attempts."""
    second = pairings.meta.judge.get("second") is not None
    tables = []
    for pair in pairings.data:
        table = Table(title=f"{pair.guard_id} × {pair.model_id}: rates in % (95% interval)")
        columns = ["transformation", "evasion", "regression", "preservation", "qualifies", "unparseable", "missing"]
        rows = [(row, Evidence.of(row)) for row in pair.transformations]
        stacked = any(evidence.layers is not None for _, evidence in rows)
        if stacked:
            columns.append("stopped by (attempts)")
        if second:
            columns[5:5] = ["2nd judge", "agree"]
        for column in columns:
            table.add_column(column, justify="left" if column == "transformation" else "right")
        for row, evidence in rows:
            cells = [row.name, *(_rate(getattr(row, rate), row.interval(rate), row.is_defined(rate))
                                 for rate in ("evasion", "regression", "preservation")),
                     "[red]yes[/red]" if row.qualifies else "no", str(evidence.counts["unparseable"]),
                     str(row.missing_outputs())]
            if stacked:
                cells.append(stopped_by(evidence.layers) if evidence.layers is not None else "—")
            if second:
                s = evidence.second_judge
                assert s is not None, "a study with two judges writes each transformation's second_judge"
                cells[5:5] = [_rate(s.preservation, None), _rate(s.agreement, None)]
            table.add_row(*cells)
        tables.append(table)
    return tables


def _kappa(figure: dict[str, Any] | None) -> str:
    if figure is None or figure["estimate"] is None:
        return "undefined"
    low = "" if figure["low"] is None else f" ({figure['low']:.3f}–{figure['high']:.3f})"
    return f"{figure['estimate']:.3f}{low}"


def judges_table(pairings: Pairings) -> Table | None:
    """Each judge against people (its validation record) and, with two judges, against each other,
    side by side: Cohen's kappa on comply vs not comply with its 95% interval."""
    judge = pairings.meta.judge
    judges = [judge] + ([judge["second"]] if judge.get("second") else [])
    if not any(j.get("validation") for j in judges) and "inter_judge" not in judge:
        return None
    table = Table(title="judges: Cohen's kappa, comply vs not comply (95% interval)")
    for column in ("between", "kappa", "n", "ceiling (annotators)"):
        table.add_column(column, justify="left" if column == "between" else "right")
    if "inter_judge" in judge:
        inter = judge["inter_judge"]
        table.add_row(f"{judge.get('id')} and {judge['second'].get('id')}", _kappa(inter["kappa_comply"]), str(inter["n"]), "")
    for j in judges:
        v = j.get("validation")
        table.add_row(f"{j.get('id')} and people", _kappa(v["kappa_comply"]) if v else "not validated",
                      str(v["n"]) if v else "—", _kappa(v["ceiling_kappa_comply"]) if v else "")
    return table
