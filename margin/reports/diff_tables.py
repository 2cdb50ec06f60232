"""Rich tables for `margin diff`, read from the diff document, so the screen shows exactly
the numbers `--json` prints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.markup import escape
from rich.table import Table

from margin.reports.diff import target_of
from margin.reports.tables import HEADLINE, fmt, with_ci
from margin.util.display import make_visible

SLICE_FIGURES = ("unsafe_margin", "safe_margin", "balanced_margin")


def change(row: Mapping[str, Any]) -> str:
    """`+1.23 [0.10, 2.40]`, starred where the interval leaves out zero."""
    if row.get("difference") is None:
        return "—"
    interval = row.get("interval") or [None, None]
    star = " *" if row.get("moves") else ""
    return f"{row['difference']:+.2f} [{fmt(interval[0])}, {fmt(interval[1])}]{star}"


def figures_table(document: Mapping[str, Any]) -> Table:
    a, b = document["a"], document["b"]
    table = Table(title=f"B − A: {b['guard_id']} vs {a['guard_id']}, {target_of(document)} target "
                        "(* the 95% interval leaves out 0)")
    for column in ("figure", f"A {a['source']}", f"B {b['source']}", "B − A [95% CI]"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for name, label in HEADLINE:
        row = document["figures"][name]
        table.add_row(label, with_ci(row["a"]["value"], row["a"]["interval"]),
                      with_ci(row["b"]["value"], row["b"]["interval"]), change(row))
    return table


def slices_table(dimension: str, rows: Mapping[str, Mapping[str, Any]]) -> Table:
    table = Table(title=f"B − A per {dimension}")
    table.add_column(dimension)
    for name in SLICE_FIGURES:
        table.add_column(name.replace("_", " "), justify="right")
    for value, figures in rows.items():
        table.add_row(escape(value), *(change(figures[name]) for name in SLICE_FIGURES))
    return table


def families_table(label: str, rows: list[Mapping[str, Any]]) -> Table:
    table = Table(title=f"{label} prompts by the family of their cheapest flip")
    for column in ("family", "A", "B", "B − A share [95% CI]"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for row in rows:
        low, high = row["interval"]
        table.add_row(escape(row["family"]), str(row["a"]), str(row["b"]),
                      f"{100 * row['difference']:+.1f}% [{100 * low:+.1f}, {100 * high:+.1f}]")
    return table


def _flip(side: Mapping[str, Any]) -> str:
    flip = side.get("flip")
    if side["state"] != "flipped" or not flip:
        return side["state"]
    text = escape(make_visible(flip["text"]))
    return f"{flip['transform']} {flip['strength']} ({flip['cost']:.2f}): {text[:60]}"


def prompts_table(title: str, rows: list[Mapping[str, Any]], limit: int) -> Table:
    table = Table(title=f"{title}: {len(rows)}" + (f" (first {limit})" if len(rows) > limit else ""))
    for column in ("prompt", "label", "A", "B"):
        table.add_column(column)
    for row in rows[:limit]:
        table.add_row(escape(row["prompt_id"]), row["label"], _flip(row["a"]), _flip(row["b"]))
    return table


def diff_tables(document: Mapping[str, Any], *, limit: int = 10) -> list[Any]:
    tables: list[Any] = [figures_table(document)]
    tables += [slices_table(d, rows) for d, rows in document["slices"].items()]
    for label, rows in (document.get("families") or {}).items():
        tables.append(families_table(label, rows))
    prompts = document.get("prompts")
    if prompts:
        costs = prompts["flip_costs"]
        tables.append(f"flip costs over {prompts['compared']} prompts scored on both sides: "
                      f"{costs['cheaper']} cheaper on B, {costs['dearer']} dearer, {costs['same']} the same")
        tables.append(prompts_table("newly broken (no flip within the budget on A)", prompts["newly_broken"], limit))
        tables.append(prompts_table("newly robust (no flip within the budget on B)", prompts["newly_robust"], limit))
    else:
        tables.append("per-family and per-prompt changes need two run folders (a snapshot has no per-prompt results)")
    return tables
