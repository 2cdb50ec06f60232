"""`margin study`: a paired study from a YAML config."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from margin.cli import options as o
from margin.cli.app import app, console, err
from margin.cli.common import check_or_fail, fail, interrupted, resume_command, say_imported_code
from margin.engine import settings
from margin.errors import EndpointDown, InputError


@app.command()
@o.with_flags(*o.ENGINE_FLAGS, into="flags")
def study(
    config: Annotated[Path, typer.Argument(help="the study's YAML config (see studies/)")],
    out: Annotated[Path | None, typer.Option(help="output folder (default runs/study-<name>-<time>)")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="continue the killed study in --out")] = False,
    *,
    flags: dict[str, Any],  # the engine flags, by name: o.ENGINE_FLAGS (its limits are the config's `runtime:`)
    no_cache: Annotated[bool, typer.Option("--no-cache", help="neither read nor write the verdict and response caches")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="print pairings.json instead of the tables")] = False,
) -> None:
    """A paired study: guards x protected models x transformations, judged; writes pairings.json."""
    from margin.studies.plan import plan_study
    engine = flags["engine"]
    settings.ENGINE.check_choice(engine, "--engine")
    if resume and out is None:
        raise InputError("needs --out, the folder of the study to continue", field="--resume")
    try:
        plan = plan_study(config, on_guard=lambda spec: say_imported_code([spec]))
    except KeyboardInterrupt:
        interrupted(None, None)
    from margin.studies.runner import (
        CoverageError,
        check_coverage,
        check_out_dir,
        default_out_dir,
        run_study,
    )

    out_dir = out or default_out_dir(plan)
    if not out_dir.is_dir():  # a folder that exists is checked under its lock, by run_study
        check_out_dir(plan, out_dir, resume)
    try:
        with err.status("starting") as status:
            stage_now = ["starting"]
            answered = [0]

            def on_stage(stage: str) -> None:
                stage_now[0], answered[0] = stage, 0
                status.update(stage)

            def on_batch(pool: str, texts: int, _compute_s: float) -> None:
                answered[0] += texts
                status.update(f"{stage_now[0]}: {answered[0]:,} texts answered (last batch: {pool})")

            outcome = run_study(plan, out_dir, resume=resume, engine=engine,  # type: ignore[arg-type]
                                ray_address=flags["ray_address"], cache=not no_cache, on_stage=on_stage,
                                on_batch=on_batch)
        # printed inside the try: a Ctrl-C meanwhile still names the folder and its --resume
        if as_json:
            sys.stdout.write(json.dumps(outcome.pairings, ensure_ascii=False) + "\n")
        else:
            print_study(outcome, out_dir)
    except KeyboardInterrupt:
        if (out_dir / "study.json").is_file():
            interrupted(out_dir, f"continue with\n  {resume_command('study', out_dir)}")
        interrupted(None, None)
    except EndpointDown as exc:
        fail(f"{exc}. The study stopped; what it recorded is kept in {out_dir}/. When the endpoint is back, "
             f"continue with: {resume_command('study', out_dir)}")
    except RuntimeError as exc:  # an actor or guard that cannot start: say so in one line
        fail(str(exc))
    check_or_fail([lambda: check_coverage(outcome, plan.config.runtime.max_missing)], CoverageError)


def print_study(outcome: Any, out_dir: Path) -> None:
    from margin.studies.report import evidence_tables, judges_table, pairs_table

    for table in evidence_tables(outcome.snapshot):
        console.print(table)
    console.print(pairs_table(outcome.snapshot))
    if (judges := judges_table(outcome.snapshot)) is not None:
        console.print(judges)
    calls = outcome.calls
    guard_calls = sum(s.sent for s in outcome.guards.values())
    console.print(f"guard calls {guard_calls} (cache hits {sum(s.cache_hits for s in outcome.guards.values())}), "
                  f"model and judge calls {calls.sent} (cache hits {calls.cached}, replayed {calls.replayed}, "
                  f"missing {calls.missing})")
    console.print(f"wrote {out_dir}/ (pairings.json, cases.jsonl, pairing-matrix.png, capability-ladder.png, "
                  f"receipts)")
