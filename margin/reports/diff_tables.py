"""Rich tables for `margin diff`, read from the diff document, so the screen shows exactly
the numbers `--json` prints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.markup import escape
from rich.table import Table

from margin.reports.diff import DiffDocument, FamilyShare, FigureChange, PromptChange, PromptSide
from margin.reports.tables import HEADLINE, fmt, with_ci
from margin.util.display import make_visible

SLICE_FIGURES = ("unsafe_margin", "safe_margin", "balanced_margin")


def change(row: FigureChange) -> str:
    """`+1.23 [0.10, 2.40]`, starred where the interval leaves out zero."""
    if row.difference is None:
        return "—"
    low, high = row.interval or (None, None)
    star = " *" if row.moves else ""
    return f"{row.difference:+.2f} [{fmt(low)}, {fmt(high)}]{star}"


def figures_table(document: DiffDocument) -> Table:
    a, b = document.a, document.b
    table = Table(title=f"B − A: {b.guard_id} vs {a.guard_id}, {document.target} target "
                        "(* the 95% interval leaves out 0)")
    for column in ("figure", f"A {a.source}", f"B {b.source}", "B − A [95% CI]"):
        table.add_column(column, justify="left" if column == "figure" else "right")
    for name, label in HEADLINE:
        row = document.figures[name]
        table.add_row(label, with_ci(row.a.value, row.a.interval), with_ci(row.b.value, row.b.interval), change(row))
    return table


def slices_table(dimension: str, rows: Mapping[str, Mapping[str, FigureChange]]) -> Table:
    table = Table(title=f"B − A per {dimension}")
    table.add_column(dimension)
    for name in SLICE_FIGURES:
        table.add_column(name.replace("_", " "), justify="right")
    for value, figures in rows.items():
        table.add_row(escape(value), *(change(figures[name]) for name in SLICE_FIGURES))
    return table


def families_table(label: str, rows: Sequence[FamilyShare]) -> Table:
    table = Table(title=f"{label} prompts by the family of their cheapest flip")
    for column in ("family", "A", "B", "B − A share [95% CI]"):
        table.add_column(column, justify="left" if column == "family" else "right")
    for row in rows:
        low, high = row.interval
        table.add_row(escape(row.family), str(row.a), str(row.b),
                      f"{100 * row.difference:+.1f}% [{100 * low:+.1f}, {100 * high:+.1f}]")
    return table


def _flip(side: PromptSide) -> str:
    flip = side.flip
    if side.state != "flipped" or not flip:
        return side.state
    text = escape(make_visible(flip.text))
    return f"{flip.transform} {flip.strength} ({flip.cost:.2f}): {text[:60]}"


def prompts_table(title: str, rows: Sequence[PromptChange], limit: int) -> Table:
    table = Table(title=f"{title}: {len(rows)}" + (f" (first {limit})" if len(rows) > limit else ""))
    for column in ("prompt", "label", "A", "B"):
        table.add_column(column)
    for row in rows[:limit]:
        table.add_row(escape(row.prompt_id), row.label, _flip(row.a), _flip(row.b))
    return table


def diff_tables(document: DiffDocument, *, limit: int = 10) -> list[Table | str]:
    tables: list[Table | str] = [figures_table(document)]
    tables += [slices_table(d, rows) for d, rows in document.slices.items()]
    for label, rows in (document.families or {}).items():
        tables.append(families_table(label, rows))
    prompts = document.prompts
    if prompts:
        costs = prompts.flip_costs
        tables.append(f"flip costs over {prompts.compared} prompts scored on both sides: "
                      f"{costs.cheaper} cheaper on B, {costs.dearer} dearer, {costs.same} the same")
        tables.append(prompts_table("newly broken (no flip within the budget on A)", prompts.newly_broken, limit))
        tables.append(prompts_table("newly robust (no flip within the budget on B)", prompts.newly_robust, limit))
    else:
        tables.append("per-family and per-prompt changes need two run folders (a snapshot has no per-prompt results)")
    return tables
