"""`margin transforms list|apply` and `margin guards list`: what margin can use."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from margin.cli import options as o
from margin.cli.app import console, guards_app, transforms_app
from margin.errors import InputError
from margin.runrecord import DEFAULT_SEED


@transforms_app.command("list")
def transforms_list(as_json: o.AsJson = False) -> None:
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
    seed: Annotated[int, typer.Option()] = DEFAULT_SEED,
    as_json: Annotated[bool, typer.Option("--json", help="print {text, cost}")] = False,
) -> None:
    """Apply one transform to TEXT; print the result and its cost against TEXT alone."""
    from margin.cost import prompt_cost
    from margin.transforms.registry import registry
    from margin.util.display import make_visible
    from margin.util.suggest import did_you_mean

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
def guards_list(as_json: o.AsJson = False) -> None:
    """Guards and presets, with family, backends and label semantics."""
    from margin.guards.spec import BUILTIN

    rows: list[dict[str, Any]] = [
        {"name": g.name, "family": g.family, "description": g.description, "checkpoint": g.checkpoint,
         "revision": g.revision, "default_backend": g.default_backend, "backends": list(g.backends),
         "labels": g.labels, "shapes": g.shapes.as_json()} for g in BUILTIN.values()]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    table = Table()
    for column in ("name", "family", "checkpoint", "backends", "targets"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["name"], r["family"], r["checkpoint"], ", ".join(r["backends"]),
                      ", ".join(r["shapes"]["targets"]))
    console.print(table)
