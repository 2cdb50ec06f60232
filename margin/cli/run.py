"""`margin run`: search every prompt for its cheapest flip."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from margin.cli import common
from margin.cli import options as o
from margin.cli.app import app, console, err
from margin.cli.common import (
    call_settings,
    check_or_fail,
    fail,
    fmt,
    parse_share,
    resume_command,
    say_imported_code,
)
from margin.cli.progress import RunProgress
from margin.engine import settings
from margin.errors import EndpointDown, InputError
from margin.runrecord import (
    DEFAULT_BUDGET,
    DEFAULT_COST_NORM,
    DEFAULT_DATASET,
    DEFAULT_MAX_CALLS,
    DEFAULT_SEARCH,
    DEFAULT_SEED,
    DEFAULT_SUITE,
)


@app.command()
@o.with_flags(*o.ENGINE_FLAGS, *o.LIMIT_FLAGS, into="flags")
def run(
    guard: o.Guard,
    dataset: o.Dataset = DEFAULT_DATASET,
    suite: o.Suite = DEFAULT_SUITE,
    budget: o.Budget = DEFAULT_BUDGET,
    search: Annotated[str, typer.Option(help="cheapest | exhaustive | adaptive (guard-guided; upper bounds) | bon (Best-of-N baseline)")] = DEFAULT_SEARCH,
    seed: o.Seed = DEFAULT_SEED,
    limit: o.Limit = None,
    cost_norm: o.CostNorm = DEFAULT_COST_NORM,
    target: o.TargetTurn = "prompt",
    policies: Annotated[str | None, typer.Option(help="a YAML file of policy texts by id: each case's `policy` "
                                                      "names one")] = None,
    out: Annotated[Path | None, typer.Option(help="run folder (default runs/<guard>-<time>)")] = None,
    backend: o.Backend = None,
    model: o.Model = None,
    base_url: o.BaseUrl = None,
    api_key_env: o.ApiKeyEnv = None,
    threshold: o.Threshold = None,
    max_calls: Annotated[int | None, typer.Option(help=f"adaptive, bon: guard calls per prompt (default {DEFAULT_MAX_CALLS})")] = None,
    incumbents: Annotated[str | None, typer.Option(help="adaptive: a standard run folder whose flips seed it")] = None,
    one_edit: Annotated[str | None, typer.Option(help="adaptive: guided (default: one-edit variants by the guard's "
                                                      "reaction, within --max-calls) | all (then every single "
                                                      "edit left, beyond --max-calls: the typo-sized ones and "
                                                      "every edit transform at every position, each cost "
                                                      "certified minimal among them; run.json names the set) | "
                                                      "none (no sweep: the fewest calls)")] = None,
    normalize: Annotated[str | None, typer.Option(help="a defence before the guard: nfkc | strip-format | "
                                                       "strip-marks | skeleton | decode | all, or several joined by +")] = None,
    *,
    flags: dict[str, Any],  # the engine and limit flags, by name: o.ENGINE_FLAGS, o.LIMIT_FLAGS
    replicas: o.Replicas = None,
    num_cpus: o.NumCpus = None,
    num_gpus: o.NumGpus = None,
    resume: Annotated[Path | None, typer.Option(help="continue the killed run in this folder (same options)")] = None,
    shard: Annotated[str | None, typer.Option(help="i/n: every n-th prompt from the i-th (join with `margin merge`)")] = None,
    drivers: o.Drivers = settings.DRIVERS.flag_default,
    driver_cpus: o.DriverCpus = settings.DRIVER_CPUS.flag_default,
    no_cache: o.NoCache = False,
) -> None:
    """Search every prompt for its cheapest flip and write receipts, results and a snapshot."""
    from margin.guards.make import parse_guard_spec
    from margin.runs.preparing.config import RunConfig
    from margin.runs.preparing.shards import parse_shard
    from margin.runs.recording.outputs import CoverageError, check_coverage

    if resume is not None and out is not None and out != resume:
        raise InputError("give either --out or --resume (the folder to continue), not both", field="--out")
    calls = call_settings(flags)
    spec = parse_guard_spec(guard, backend=backend, model=model, base_url=base_url, api_key_env=api_key_env,
                            threshold=threshold, normalize=normalize, replicas=replicas, num_cpus=num_cpus,
                            num_gpus=num_gpus)
    say_imported_code([spec])
    config = RunConfig(guard=spec, dataset=dataset, suite=suite, budget=budget, search=search, seed=seed, limit=limit,
                       cost_norm=cost_norm, target=target, policies=policies,  # type: ignore[arg-type]
                       calls=calls, shard=parse_shard(shard) if shard else None, drivers=drivers,
                       driver_cpus=driver_cpus, cache=not no_cache,
                       max_missing=parse_share(flags["max_missing"], "--max-missing"),
                       max_calls=max_calls, incumbents=incumbents, one_edit=one_edit)
    outcome = run_and_summarise(config, resume, out)
    check_or_fail([lambda: check_coverage(outcome.results, config.max_missing)], CoverageError)


def run_and_summarise(config: Any, resume: Path | None, out: Path | None) -> Any:
    from margin.runs.executing.execute import execute
    from margin.runs.preparing.prepare import prepare
    from margin.runs.recording.folder import default_out_dir

    target = resume  # the folder a Ctrl-C leaves to resume (a new one only once the run has begun)
    try:
        prepared = prepare(config)
        assert prepared.info is not None
        if prepared.cost_model.norm == "corpus":
            from margin.cost import cost_unit_warning

            warning = cost_unit_warning([(p.id, p.text) for p in prepared.dataset.prompts])
            if warning is not None:
                err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
        if prepared.limit_sample:
            from margin.runs.preparing.subset import describe

            console.print(describe(prepared.limit_sample, len(prepared.dataset.prompts)), markup=False, highlight=False)
        out_dir = target = resume or out or default_out_dir(prepared.info.id)
        outcome = execute_with_progress(prepared, out_dir, resume is not None, execute)
        print_summary(outcome)  # a Ctrl-C while it prints still says where the run is
        normalize = prepared.spec.normalize if prepared.spec is not None else None
        if normalize is not None and "decode" in normalize.split("+"):
            from margin.reports.observations import read_calls
            from margin.runfolder import read_jsonl
            from margin.runs.ablate import decoded_calls

            extra = decoded_calls(prepared, read_calls(read_jsonl(out_dir / "receipts.jsonl")), normalize)
            asked = sum(r.guard_calls for r in outcome.results)
            console.print(f"decode: the guard also read {extra:,} decoded texts for the {asked:,} candidates "
                          f"asked about ({asked + extra:,} guard reads in deployment)")
    except KeyboardInterrupt:
        interrupted(target)
    except EndpointDown as exc:
        fail(f"{exc}. The run stopped; what it recorded is kept in {target}/. When the endpoint is back, "
             f"continue with: {resume_command('run', target)}")
    return outcome


def interrupted(out_dir: Path | None) -> NoReturn:
    """Ctrl-C: what was recorded stays, and the command that continues it is printed (exit 130)."""
    if out_dir is not None and (out_dir / "run.json").is_file():
        common.interrupted(out_dir, f"continue with\n  {resume_command('run', out_dir)}")
    common.interrupted(None, None)


def execute_with_progress(prepared: Any, out_dir: Path, resume: bool, execute: Any) -> Any:
    """Run with progress: prompts done, flips, guard calls, calls/s, batch fill, cache hits, time left."""
    stats = {"calls": 0, "flips": 0, "cached": 0, "batches": 0, "texts": 0, "capacity": 0, "results": 0}
    started = time.monotonic()
    with RunProgress(len(prepared.prompts), err) as progress:

        def info() -> str:
            rate = stats["calls"] / max(time.monotonic() - started, 1e-9)
            fill = stats["texts"] / (stats["batches"] * stats["capacity"]) if stats["batches"] else 0.0
            return (f"flips {stats['flips']}  guard calls {stats['calls']:,} ({rate:,.0f}/s)  "
                    f"batch fill {100 * fill:.0f}%  cache hits {stats['cached']:,}")

        def on_call(call: Any) -> None:
            stats["cached"] += call.cached

        def on_batch(texts: int, capacity: int, compute_s: float) -> None:
            stats["batches"] += 1
            stats["texts"] += texts
            stats["calls"] += texts
            stats["capacity"] = capacity
            progress.update(info=info())

        def on_result(result: Any) -> None:
            stats["flips"] += result.flip is not None or result.flip_cost == 0
            stats["results"] += 1
            progress.update(done=stats["results"], info=info())

        def on_progress(done: int, calls: int) -> None:  # several drivers, as they go
            stats["calls"] = calls
            progress.update(done=done, info=info())

        return execute(prepared, out_dir, resume=resume, on_call=on_call, on_result=on_result,
                       on_batch=on_batch, on_progress=on_progress)


def print_summary(outcome: Any) -> None:
    from margin.reports.protocols import ADAPTIVE_PROTOCOL
    from margin.reports.tables import margins_table

    adaptive = outcome.snapshot.meta.protocol == ADAPTIVE_PROTOCOL
    title = f"margin — {outcome.snapshot.data[0].id}" + (
        " — ADAPTIVE (upper bounds; not comparable with standard-suite margins)" if adaptive else "")
    table = margins_table(outcome.snapshot.data[0], title)  # figures with their 95% intervals
    # Three counts that differ: what the searches asked, what was sent, what needed no call.
    table.add_row("texts the searches asked about", f"{sum(r.guard_calls for r in outcome.results):,}")
    table.add_row("guard calls sent (retries, hedges)", f"{outcome.guard_calls:,}")
    table.add_row("answered without a call (cache, repeats)", f"{outcome.cache_hits:,}")
    for name, value in engine_rows(outcome):
        table.add_row(name, value)
    console.print(table)
    console.print(f"wrote {outcome.out_dir}/ (receipts.jsonl, results.jsonl, snapshot.json, curves.png/.svg); "
                  f"margin report {outcome.out_dir} for slices, coverage and flips")


def engine_rows(outcome: Any) -> list[tuple[str, str]]:
    """How the guard's calls went: batches for in-process guards, requests for endpoints."""
    f = outcome.figures
    rows = []
    if f.batches:
        rate = outcome.guard_calls / f.search_s if f.search_s else 0.0
        rows.append(("calls per second", f"{rate:,.0f}"))
        if f.streamed:
            p50, p95 = f.latency(0.5), f.latency(0.95)
            rows.append(("request latency p50 / p95 s", f"{p50 or 0:.3f} / {p95 or 0:.3f}"))
            rows.append(("retries / hedges / 429-503", f"{f.retries} / {f.hedges} / {f.overloads}"))
            if f.pauses or f.waits:
                rows.append(("endpoint paused / retries that waited", f"{f.pauses} / {f.waits}"))
            if f.lowest_concurrency is not None:
                rows.append(("lowest concurrency", f"{f.lowest_concurrency:.0f}"))
            rows.append(("wall s", f"{f.search_s:.1f}"))
        else:
            rows.append(("mean batch fill %", fmt(100 * (f.mean_fill or 0.0), 1)))
            rows.append(("guard compute / wall s", f"{f.compute_s:.1f} / {f.search_s:.1f}"))
            if f.retries:
                rows.append(("retries", str(f.retries)))
    if f.restarts:
        rows.append(("guard actor restarts", str(f.restarts)))
    if f.timeouts:
        rows.append(("calls past --call-timeout", str(f.timeouts)))
    return rows
