"""`margin publish`: ranked, immutable leaderboard and pairings snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from margin.cli.app import app, console
from margin.cli.common import families, parse_share
from margin.errors import InputError


@app.command()
def publish(
    inputs: Annotated[list[Path], typer.Argument(help="run folders, and paired-study outputs (pairings.json)")],
    out: Annotated[Path, typer.Option(help="folder for the snapshots and plots")],
    base_url: Annotated[str | None, typer.Option(help="URL prefix for meta.snapshot_url")] = None,
    date: Annotated[str | None, typer.Option(help="snapshot date YYYY-MM-DD (default today, UTC)")] = None,
    min_coverage: Annotated[str, typer.Option(help="share of each class's prompts (each pair's outputs) a run "
                                                   "(a study) must have scored, e.g. 99%")] = "100%",
    allow_incomplete: Annotated[bool, typer.Option("--allow-incomplete", help="publish runs and pairs below "
                                                   "--min-coverage, marked incomplete and unranked")] = False,
) -> None:
    """A ranked leaderboard snapshot (and a pairings snapshot from studies), immutable and
    named by date and content hash. Refuses runs that differ in dataset, suite, budget or cost norm,
    and incomplete evidence (below --min-coverage) unless --allow-incomplete."""
    import datetime as dt

    from margin.backends.secrets import published_url
    from margin.reports.publish import publish as do_publish
    from margin.reports.tables import leaderboard_table

    try:
        day = dt.date.fromisoformat(date) if date else None
    except ValueError:
        raise InputError(f"expected YYYY-MM-DD, got {date!r}", field="--date") from None
    if base_url is not None:
        published_url(base_url, "--base-url")
    share = parse_share(min_coverage, "--min-coverage")
    if not 0 <= share <= 1:
        raise InputError(f"expected a share from 0% to 100%, got {min_coverage!r}", field="--min-coverage")
    published = do_publish(inputs, out, base_url=base_url, date=day, families=families(), min_coverage=share,
                           allow_incomplete=allow_incomplete)
    if published.leaderboard:
        console.print(leaderboard_table(published.leaderboard))
    if published.pairings:
        counts = [d.status for d in published.pairings.data]
        incomplete = sum(not d.is_complete() for d in published.pairings.data)
        console.print(f"pairings: {len(counts)} pairs, {counts.count('bypass_found')} with a bypass found"
                      + (f", {incomplete} incomplete (marked)" if incomplete else ""))
    for path in published.files:
        console.print(f"wrote {path}")
