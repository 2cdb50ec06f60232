"""Tables for a finished study: one row per pair, then every transformation's evidence."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def _ci(interval: list[float] | None) -> str:
    return "" if not interval else f" [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]"


def pairs_table(pairings: dict[str, Any]) -> Table:
    models = {m["id"]: m for m in pairings["meta"]["models"]}
    t = pairings["meta"]["thresholds"]
    table = Table(title=f"paired study — qualifies when evasion ≥ {100 * t['evasion']:g}%, "
                        f"regression ≤ {100 * t['regression']:g}%, preservation ≥ {100 * t['preservation']:g}%")
    for column in ("guard", "model", "capability", "status", "qualifying / tested"):
        table.add_column(column, justify="right" if column in ("capability", "qualifying / tested") else "left")
    for pair in pairings["data"]:
        model = models[pair["model_id"]]
        table.add_row(pair["guard_id"], pair["model_id"], f"{model.get('capability_index', '—')}",
                      "[red]bypass found[/red]" if pair["status"] == "bypass_found" else "[green]none found[/green]",
                      f"{pair['qualifying_transformations']} / {pair['transformations_tested']}")
    return table


def evidence_table(pairings: dict[str, Any]) -> Table:
    second = pairings["meta"]["judge"].get("second") is not None
    table = Table(title="evidence per transformation (rates in %, 95% bootstrap intervals)")
    columns = ["guard", "model", "transformation", "evasion", "regression", "preservation", "qualifies",
               "unparseable", "missing"]
    if second:
        columns.insert(7, "2nd judge pres. / agree")
    for column in columns:
        table.add_column(column, justify="left" if column in ("guard", "model", "transformation") else "right")
    for pair in pairings["data"]:
        for row in pair["transformations"]:
            counts, ci = row["counts"], row["ci"]
            defined = row["defined"]
            missing = (counts["original_missing"] + counts["transformed_missing"] + counts["response_missing"]
                       + counts["judge_missing"])
            cells = [pair["guard_id"], pair["model_id"], row["name"],
                     (_pct(row["evasion"]) + _ci(ci["evasion"])) if defined["evasion"] else "— (none blocked)",
                     (_pct(row["regression"]) + _ci(ci["regression"])) if defined["regression"] else "— (none passed)",
                     (_pct(row["preservation"]) + _ci(ci["preservation"])) if defined["preservation"] else "—",
                     "[red]yes[/red]" if row["qualifies"] else "no", str(counts["unparseable"]), str(missing)]
            if second:
                s = row["second_judge"]
                cells.insert(7, f"{_pct(s['preservation'])} / {_pct(s['agreement'])}")
            table.add_row(*cells)
    return table
