"""`margin ablate`: the guard behind each defence, side by side."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from margin.cli import options as o
from margin.cli.app import app, console, err
from margin.cli.common import (
    call_settings,
    check_or_fail,
    fail,
    families,
    interrupted,
    parse_share,
    print_tables,
    resume_command,
    say_imported_code,
)
from margin.errors import EndpointDown, InputError
from margin.runrecord import (
    DEFAULT_BUDGET,
    DEFAULT_COST_NORM,
    DEFAULT_DATASET,
    DEFAULT_SEED,
    DEFAULT_SUITE,
)


@app.command()
@o.with_flags(*o.ENGINE_FLAGS, *o.LIMIT_FLAGS, into="flags")
def ablate(
    guard: o.Guard,
    defences: Annotated[str, typer.Option(help="comma-separated: none, nfkc, strip-format, strip-marks, skeleton, "
                                               "decode, all, or compositions such as nfkc+skeleton")] = (
        "none,nfkc,strip-format,skeleton,strip-marks,decode,all"),
    dataset: o.Dataset = DEFAULT_DATASET,
    suite: o.Suite = DEFAULT_SUITE,
    budget: o.Budget = DEFAULT_BUDGET,
    search: Annotated[str, typer.Option(help="exhaustive (per-family effectiveness) | cheapest (margins only)")] = "exhaustive",
    seed: o.Seed = DEFAULT_SEED,
    limit: o.Limit = None,
    cost_norm: o.CostNorm = DEFAULT_COST_NORM,
    out: o.OutDir = None,
    resume: Annotated[bool, typer.Option("--resume", help="continue the killed ablation in --out (same options)")] = False,
    backend: o.Backend = None,
    model: o.Model = None,
    base_url: o.BaseUrl = None,
    api_key_env: o.ApiKeyEnv = None,
    threshold: o.Threshold = None,
    *,
    flags: dict[str, Any],  # the engine and limit flags, by name: o.ENGINE_FLAGS, o.LIMIT_FLAGS
    replicas: o.Replicas = None,
    num_cpus: o.NumCpus = None,
    num_gpus: o.NumGpus = None,
    no_cache: o.NoCache = False,
    as_json: Annotated[bool, typer.Option("--json", help="print ablation.json instead of the tables")] = False,
) -> None:
    """One run per defence in front of the guard, on shared candidates: margins, changes against
    none with paired intervals, what each defence closes per family, and what it costs."""
    from margin.guards.make import parse_guard_spec
    from margin.runs.ablate import parse_defences, prepare_ablation
    from margin.runs.preparing.config import RunConfig

    if resume and out is None:
        raise InputError("needs --out, the folder of the ablation to continue", field="--resume")
    chosen = parse_defences(defences)
    calls = call_settings(flags)
    spec = parse_guard_spec(guard, backend=backend, model=model, base_url=base_url, api_key_env=api_key_env,
                            threshold=threshold, replicas=replicas, num_cpus=num_cpus, num_gpus=num_gpus)
    say_imported_code([spec])
    config = RunConfig(guard=spec, dataset=dataset, suite=suite, budget=budget, search=search, seed=seed, limit=limit,
                       cost_norm=cost_norm, calls=calls, cache=not no_cache,  # type: ignore[arg-type]
                       max_missing=parse_share(flags["max_missing"], "--max-missing"))
    try:
        prepared = prepare_ablation(config, chosen)
    except KeyboardInterrupt:
        interrupted(None, None)
    run_defences(prepared, out, f"ablate-{spec.id or guard}", config.max_missing, resume, as_json)


def run_defences(prepared: list[Any], out: Any, name: str, max_missing: float, resume: bool = False,
                 as_json: bool = False) -> None:
    from margin.cli.run import execute_with_progress
    from margin.reports.tables import ablation_tables
    from margin.runs.ablate import check_ablation_dir, run_ablation
    from margin.runs.executing.execute import execute
    from margin.runs.recording.folder import check_out_dir, default_out_dir
    from margin.runs.recording.outputs import CoverageError, check_coverage
    from margin.util.folderlock import hold

    out_dir = out or default_out_dir(name)

    def one(run: Any, folder: Any, again: bool) -> Any:
        return execute_with_progress(run, folder, again, execute)

    def start(defence: Any, index: int, total: int) -> None:
        err.print(f"[{index + 1}/{total}] {defence.label}", highlight=False)

    if not out_dir.is_dir():  # a --resume of no folder fails here, and no folder is made for it
        if resume:
            check_ablation_dir(prepared, out_dir)
        else:
            check_out_dir(out_dir)
    try:
        # Locked here already, so that clearing an interrupted start is this process's own
        # (run_ablation's hold of the same folder is this one).
        with hold(out_dir, what="ablation folder") as held:
            try:
                outcome = run_ablation(prepared, out_dir, families=families(), execute_one=one, resume=resume,
                                       on_start=start)
                if as_json:  # a Ctrl-C while it prints still says --resume
                    sys.stdout.write(json.dumps(outcome.record.document(), ensure_ascii=False) + "\n")
                else:
                    print_tables(ablation_tables(outcome.record))
                    console.print(f"wrote {out_dir}/: one run folder per defence, "
                                  f"{', '.join(p.name for p in outcome.files)}")
            except KeyboardInterrupt:
                if kept_if_recorded(out_dir, held.made):
                    interrupted(out_dir, f"continue with\n  {resume_command('ablate', out_dir)}")
                interrupted(None, None)
    except EndpointDown as exc:
        fail(f"{exc}. The ablation stopped; what it recorded is kept in {out_dir}/. When the endpoint is back, "
             f"continue with: {resume_command('ablate', out_dir)}")

    def check(label: str, results: Any) -> Callable[[], None]:
        def run() -> None:
            try:
                check_coverage(results, max_missing)
            except CoverageError as exc:
                raise CoverageError(f"{label}: {exc}") from None
        return run

    check_or_fail([check(defence.label, result.results)
                   for (defence, _), result in zip(prepared, outcome.outcomes, strict=True)], CoverageError)


def kept_if_recorded(out_dir: Path, made: bool) -> bool:
    """Whether an interrupted ablation recorded anything; if not, the defence folders it began
    are removed (and `out_dir`, if it made it), so the same --out can be given again."""
    from margin.runs.recording.folder import remove_unstarted, unstarted
    from margin.util.folderlock import entries

    if not out_dir.is_dir():
        return False
    if any(not (entry.is_dir() and unstarted(entry)) for entry in entries(out_dir)):
        return True
    for entry in entries(out_dir):
        remove_unstarted(entry)
    if made:
        shutil.rmtree(out_dir)  # nothing left but this process's lock
    return False
