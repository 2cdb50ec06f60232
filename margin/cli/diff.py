"""`margin diff A B` and `margin check RUN --baseline BASE`: two comparable runs or snapshots,
B minus A with intervals, and the CI gate on top of it."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from margin.cli.app import app, console
from margin.cli.common import families, print_tables

if TYPE_CHECKING:
    from margin.reports.sides import Side


def load_pair(path_a: Path, path_b: Path) -> tuple[Side, Side]:
    """Both sides, run folders first (a multi-guard snapshot picks the other side's guard),
    refused with one line (exit 2) unless they measured the same thing."""
    from margin.reports.sides import load_side, require_comparable

    first_b = path_b.is_dir() and not path_a.is_dir()
    if first_b:
        b = load_side(path_b)
        a = load_side(path_a, guard_id=b.guard_id)
    else:
        a = load_side(path_a)
        b = load_side(path_b, guard_id=a.guard_id)
    require_comparable(a, b)
    return a, b


@app.command()
def diff(
    a: Annotated[Path, typer.Argument(help="side A: a run folder or a snapshot file")],
    b: Annotated[Path, typer.Argument(help="side B: a run folder or a snapshot file")],
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
    prompts: Annotated[int, typer.Option(help="changed prompts to list per kind")] = 10,
) -> None:
    """B minus A: every figure of both with its interval, the change with its paired interval,
    per slice and per transform family, and the prompts that changed."""
    from margin.reports.diff import diff_document
    from margin.reports.diff_tables import diff_tables

    side_a, side_b = load_pair(a, b)
    document = diff_document(side_a, side_b, families())
    if as_json:
        sys.stdout.write(json.dumps(dataclasses.asdict(document), ensure_ascii=False) + "\n")
        return
    print_tables(diff_tables(document, limit=prompts))


@app.command()
def check(
    run: Annotated[Path, typer.Argument(help="the run folder (or snapshot) to check")],
    baseline: Annotated[Path, typer.Option("--baseline", help="a run folder or snapshot to compare with")],
    max_drop: Annotated[float, typer.Option("--max-drop", help="tolerated drop in margin points")] = 0.0,
    min_balanced: Annotated[float | None, typer.Option("--min-balanced", help="floor on the balanced margin")] = None,
    per_class: Annotated[bool, typer.Option("--per-class", help="also gate the unsafe and safe margins")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the verdict, its findings and the comparison as JSON")] = False,
) -> None:
    """Exit 1 if the balanced margin (with --per-class, a class margin too) dropped
    significantly against the baseline, or is under --min-balanced; else 0."""
    from margin.errors import InputError
    from margin.reports.check import explain, judge
    from margin.reports.diff import diff_document

    if not (math.isfinite(max_drop) and max_drop >= 0):
        raise InputError("must be a finite number, 0 or more (margin points)", field="--max-drop")
    if min_balanced is not None and not math.isfinite(min_balanced):
        raise InputError("must be a finite number (margin points)", field="--min-balanced")
    side_a, side_b = load_pair(baseline, run)
    document = diff_document(side_a, side_b, families())
    verdict = judge(document, max_drop=max_drop, min_balanced=min_balanced, per_class=per_class)
    if as_json:
        findings = [dataclasses.asdict(f) for f in verdict.findings]
        sys.stdout.write(json.dumps({"passed": verdict.passed, "findings": findings, "diff": dataclasses.asdict(document)},
                                    ensure_ascii=False) + "\n")
    else:
        for line in explain(document, verdict):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if not verdict.passed:
        raise typer.Exit(1)
