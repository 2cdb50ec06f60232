"""The `margin` command line. I/O lives here; the work is in the packages below."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from margin.errors import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="How much must a prompt change before a guardrail gets it wrong?")
transforms_app = typer.Typer(no_args_is_help=True, help="The costed transformation library.")
guards_app = typer.Typer(no_args_is_help=True, help="Guards margin can evaluate.")
app.add_typer(transforms_app, name="transforms")
app.add_typer(guards_app, name="guards")

console = Console()
err = Console(stderr=True)


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


@app.command()
def run(
    guard: Annotated[str, typer.Option(help="keyword | python:FILE.py:Class")],
    dataset: Annotated[str, typer.Option(help="sample | xstest | PATH (.csv, .jsonl, .parquet)")] = "sample",
    suite: Annotated[str, typer.Option(help="standard | quick | PATH to a suite YAML")] = "standard",
    budget: Annotated[float, typer.Option(help="largest tested cost B")] = 100.0,
    search: Annotated[str, typer.Option(help="cheapest | exhaustive")] = "cheapest",
    seed: Annotated[int, typer.Option(help="seed for every transform")] = 0,
    limit: Annotated[int | None, typer.Option(help="only the first N prompts")] = None,
    cost_norm: Annotated[str, typer.Option(help="corpus | prompt")] = "corpus",
    batch_size: Annotated[int, typer.Option(help="texts per guard call")] = 64,
    out: Annotated[Path | None, typer.Option(help="run folder (default runs/<guard>-<time>)")] = None,
    normalize: Annotated[str | None, typer.Option(
        help="normalise every text before the guard: nfkc | strip-format | nfkc+strip-format")] = None,
) -> None:
    """Search every prompt for its cheapest flip and write receipts, results and a snapshot."""
    from margin.search.run import RunConfig, default_out_dir, execute, prepare

    config = RunConfig(guard=guard, dataset=dataset, suite=suite, budget=budget, search=search,
                       seed=seed, limit=limit, cost_norm=cost_norm,  # type: ignore[arg-type]
                       batch_size=batch_size, normalize=normalize)
    prepared = prepare(config)
    assert prepared.guard is not None
    out_dir = out or default_out_dir(prepared.guard.info.id)
    total = len(prepared.prompts)
    stats = {"calls": 0, "flips": 0, "cached": 0}
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=err,
                  transient=True) as progress:
        task = progress.add_task("prompts", total=total, info="")

        def on_call(call: Any) -> None:
            stats["cached" if call.cached else "calls"] += 1

        def on_result(result: Any) -> None:
            stats["flips"] += result.flip is not None or result.flip_cost == 0
            progress.update(task, advance=1, info=f"flips {stats['flips']}  guard calls {stats['calls']}  "
                                                  f"cache hits {stats['cached']}")

        outcome = execute(prepared, out_dir, on_call=on_call, on_result=on_result)
    print_summary(outcome)


def print_summary(outcome: Any) -> None:
    report = outcome.report
    table = Table(title=f"margin — {outcome.snapshot['data'][0]['id']}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("balanced margin", fmt(report.balanced_margin))
    table.add_row("unsafe margin (false allows)", fmt(report.unsafe_margin))
    table.add_row("safe margin (false blocks)", fmt(report.safe_margin))
    table.add_row("clean balanced accuracy %", fmt(report.clean_balanced_accuracy))
    table.add_row("prompts scored (unsafe / safe)", f"{report.n['unsafe']} / {report.n['safe']}")
    table.add_row("prompts missing (lost coverage)", str(outcome.missing))
    table.add_row("guard calls", str(outcome.guard_calls))
    console.print(table)
    console.print(f"wrote {outcome.out_dir}/ (receipts.jsonl, results.jsonl, snapshot.json, curves.png)")


@transforms_app.command("list")
def transforms_list(as_json: Annotated[bool, typer.Option("--json", help="machine-readable")] = False) -> None:
    """Every transform with its family, kind, strengths and NFKC stability."""
    from margin.transforms.registry import registry

    infos = [t.info for t in registry().values()]
    if as_json:
        console.print_json(json.dumps([
            {"name": i.name, "family": i.family, "kind": i.kind, "strengths": list(i.strengths),
             "visible": i.visible, "nfkc_stable": i.nfkc_stable, "assumption": i.assumption}
            for i in infos
        ]))
        return
    table = Table(caption="edits also take salient:k, salient:p% (salient order) and @i (one edit in word i); "
                          "docs/transforms.md has costs and assumptions")
    for column in ("name", "family", "kind", "strengths", "nfkc_stable", "visible"):
        table.add_column(column)
    for i in infos:
        table.add_row(i.name, i.family, i.kind, " ".join(i.strengths), str(i.nfkc_stable), str(i.visible))
    console.print(table)


@transforms_app.command("apply")
def transforms_apply(
    name: str,
    text: str,
    strength: Annotated[str | None, typer.Option(help="k, p%, @i, or a wrapper variant")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="print {text, cost}")] = False,
) -> None:
    """Apply one transform to TEXT; print the result and its cost against TEXT alone."""
    from margin.cost import prompt_cost
    from margin.display import make_visible
    from margin.suggest import did_you_mean
    from margin.transforms.registry import registry

    table = registry()
    if name not in table:
        raise InputError(f"unknown transform {name!r}{did_you_mean(name, table)}", field="NAME")
    if not text:
        raise InputError("must not be empty", field="TEXT")
    transform = table[name]
    chosen = strength if strength is not None else transform.strengths[0]
    try:
        result = transform.apply(text, chosen, seed)
    except ValueError as exc:
        raise InputError(str(exc), field="--strength") from None
    cost = prompt_cost(text, result)
    if as_json:
        sys.stdout.write(json.dumps({"text": result, "cost": cost}, ensure_ascii=False) + "\n")
        return
    console.print(make_visible(result), markup=False, highlight=False)
    console.print(f"cost {cost:.2f} ({transform.name} @ {chosen}, seed {seed})", highlight=False)


@guards_app.command("list")
def guards_list(as_json: Annotated[bool, typer.Option("--json", help="machine-readable")] = False) -> None:
    """Guards and presets, with family, backends and label semantics."""
    from margin.guards.spec import BUILTIN

    rows: list[dict[str, Any]] = [{"name": g.name, "family": g.family, "description": g.description,
             "backends": list(g.backends), "labels": g.labels} for g in BUILTIN.values()]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    table = Table()
    for column in ("name", "family", "backends", "description"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["name"], r["family"], ", ".join(r["backends"]), r["description"])
    console.print(table)


def main() -> None:
    try:
        app(standalone_mode=False)
    except InputError as exc:
        sys.stderr.write(f"error: {exc}\n")  # one line, never wrapped
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
