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
    guard: Annotated[str, typer.Option(help="a preset (margin guards list) | keyword | minilm | "
                                            "python:FILE.py:Class | a guard file (.yaml)")],
    dataset: Annotated[str, typer.Option(help="sample | xstest | PATH (.csv, .jsonl, .parquet)")] = "sample",
    suite: Annotated[str, typer.Option(help="standard | quick | PATH to a suite YAML")] = "standard",
    budget: Annotated[float, typer.Option(help="largest tested cost B")] = 100.0,
    search: Annotated[str, typer.Option(help="cheapest | exhaustive | adaptive (guard-guided; upper bounds)")] = "cheapest",
    seed: Annotated[int, typer.Option(help="seed for every transform")] = 0,
    limit: Annotated[int | None, typer.Option(help="only the first N prompts")] = None,
    cost_norm: Annotated[str, typer.Option(help="corpus | prompt")] = "corpus",
    batch_size: Annotated[int, typer.Option(help="texts per guard call")] = 64,
    out: Annotated[Path | None, typer.Option(help="run folder (default runs/<guard>-<time>)")] = None,
    backend: Annotated[str | None, typer.Option(help="transformers | vllm | openai (the preset's default)")] = None,
    model: Annotated[str | None, typer.Option(help="checkpoint or served model name; REPO@COMMIT pins")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL (--backend openai)")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="NAME of the env var holding the API key")] = None,
    threshold: Annotated[float | None, typer.Option(help="unsafe when p_unsafe >= this (default 0.5)")] = None,
    max_calls: Annotated[int | None, typer.Option(help="adaptive: guard calls per prompt (default 100)")] = None,
    incumbents: Annotated[str | None, typer.Option(help="adaptive: a standard run folder whose flips seed it")] = None,
    normalize: Annotated[str | None, typer.Option(
        help="a defence before the guard: nfkc | strip-format | strip-marks | skeleton | decode | all, "
             "or several joined by + (nfkc+strip-format)")] = None,
    engine: Annotated[str, typer.Option(help="ray (guard actors) | local (this process, no Ray)")] = "ray",
    ray_address: Annotated[str | None, typer.Option(help="run on this Ray cluster: auto | HOST:PORT | ray://HOST:PORT (default: $RAY_ADDRESS, else a local Ray started for the run)")] = None,
    replicas: Annotated[int | None, typer.Option(help="guard actors (data parallelism)")] = None,
    num_cpus: Annotated[float | None, typer.Option(help="CPUs per guard actor")] = None,
    num_gpus: Annotated[float | None, typer.Option(help="GPUs per guard actor")] = None,
    resume: Annotated[Path | None, typer.Option(help="continue the killed run in this folder (same options)")] = None,
    shard: Annotated[str | None, typer.Option(help="i/n: run every n-th prompt from the i-th (join with `margin merge`)")] = None,
    drivers: Annotated[int, typer.Option(help="drivers searching at once: Ray actors sharing the guard (for guards "
                                              "faster than one driver can feed)")] = 1,
    driver_cpus: Annotated[float, typer.Option(help="CPUs each of --drivers reserves")] = 1.0,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="neither read nor write the verdict cache")] = False,
    max_missing: Annotated[str, typer.Option(help="fail past this share of prompts without a verdict (1% or 0.01)")] = "1%",
    max_attempts: Annotated[int | None, typer.Option(
        help="attempts per text before it counts as missing (default: the guard file's, else 3)")] = None,
    call_timeout: Annotated[float | None, typer.Option(
        help="seconds one request may take (endpoints; default 120) or one batch (in-process guards; "
             "default 300) before it is an attempt without output")] = None,
    max_concurrency: Annotated[int | None, typer.Option(
        help="endpoints: requests in flight at most (default 64; backs off on 429/503)")] = None,
    requests_per_second: Annotated[float | None, typer.Option(
        help="endpoints: requests started per second at most (default: no limit)")] = None,
    hedge_after: Annotated[str | None, typer.Option(
        help="endpoints: send a second copy of a request unanswered after this many seconds | auto "
             "(3 x p95 latency, at least 1 s; the default) | off")] = None,
) -> None:
    """Search every prompt for its cheapest flip and write receipts, results and a snapshot."""
    from margin.guards.make import parse_guard_spec
    from margin.runs.run import (
        CoverageError,
        RunConfig,
        check_coverage,
        default_out_dir,
        execute,
        prepare,
    )
    from margin.runs.shards import parse_shard

    if resume is not None and out is not None and out != resume:
        raise InputError("give either --out or --resume (the folder to continue), not both", field="--out")
    limits = check_limits(max_attempts=max_attempts, call_timeout=call_timeout, max_concurrency=max_concurrency,
                          requests_per_second=requests_per_second, hedge_after=hedge_after)
    spec = parse_guard_spec(guard, backend=backend, model=model, base_url=base_url, api_key_env=api_key_env,
                            threshold=threshold, normalize=normalize, replicas=replicas, num_cpus=num_cpus,
                            num_gpus=num_gpus)
    config = RunConfig(guard=spec, dataset=dataset, suite=suite, budget=budget, search=search,
                       seed=seed, limit=limit, cost_norm=cost_norm,  # type: ignore[arg-type]
                       batch_size=batch_size, engine=engine,  # type: ignore[arg-type]
                       ray_address=ray_address, shard=parse_shard(shard) if shard else None,
                       drivers=drivers, driver_cpus=driver_cpus,
                       cache=not no_cache, max_missing=parse_share(max_missing, "--max-missing"),
                       max_calls=max_calls, incumbents=incumbents, **limits)
    prepared = prepare(config)
    assert prepared.info is not None
    out_dir = resume or out or default_out_dir(prepared.info.id)
    outcome = execute_with_progress(prepared, out_dir, resume is not None, execute)
    print_summary(outcome)
    if spec.normalize is not None and "decode" in spec.normalize.split("+"):
        from margin.runfolder import read_jsonl
        from margin.runs.ablate import decoded_calls

        extra = decoded_calls(prepared, read_jsonl(out_dir / "receipts.jsonl"), spec.normalize)
        asked = sum(r.guard_calls for r in outcome.results)
        console.print(f"decode: the guard also read {extra:,} decoded texts for the {asked:,} candidates "
                      f"asked about ({asked + extra:,} guard reads in deployment)")
    try:
        check_coverage(outcome.results, config.max_missing)
    except CoverageError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def check_limits(*, max_attempts: int | None, call_timeout: float | None, max_concurrency: int | None,
                 requests_per_second: float | None, hedge_after: str | None) -> dict[str, Any]:
    """The call-limit flags as RunConfig fields, each checked (exit 2 naming the flag)."""
    for value, flag in ((max_attempts, "--max-attempts"), (max_concurrency, "--max-concurrency")):
        if value is not None and value < 1:
            raise InputError("must be at least 1", field=flag)
    for number, flag in ((call_timeout, "--call-timeout"), (requests_per_second, "--requests-per-second")):
        if number is not None and number <= 0:
            raise InputError("must be positive", field=flag)
    hedge: float | str | None = hedge_after
    if hedge_after is not None and hedge_after not in ("auto", "off"):
        try:
            hedge = float(hedge_after)
        except ValueError:
            raise InputError(f"expected seconds, auto or off, got {hedge_after!r}", field="--hedge-after") from None
        if hedge <= 0:
            raise InputError("must be positive (or off)", field="--hedge-after")
    return {"max_attempts": max_attempts, "call_timeout_s": call_timeout, "max_concurrency": max_concurrency,
            "requests_per_second": requests_per_second, "hedge_after_s": hedge}


def parse_share(text: str, flag: str) -> float:
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise InputError(f"expected a share such as 1% or 0.01, got {text!r}", field=flag) from None


def execute_with_progress(prepared: Any, out_dir: Path, resume: bool, execute: Any) -> Any:
    """Run with a live line: prompts done, flips, guard calls, calls/s, batch fill, cache hits."""
    import time

    total = len(prepared.prompts)
    stats = {"calls": 0, "flips": 0, "cached": 0, "batches": 0, "texts": 0, "capacity": 0}
    started = time.monotonic()
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=err,
                  transient=True) as progress:
        task = progress.add_task("prompts", total=total, info="starting")

        def show() -> None:
            rate = stats["calls"] / max(time.monotonic() - started, 1e-9)
            fill = stats["texts"] / (stats["batches"] * stats["capacity"]) if stats["batches"] else 0.0
            progress.update(task, info=f"flips {stats['flips']}  guard calls {stats['calls']} "
                                       f"({rate:,.0f}/s)  batch fill {100 * fill:.0f}%  "
                                       f"cache hits {stats['cached']}")

        def on_call(call: Any) -> None:
            stats["cached"] += call.cached

        def on_batch(texts: int, capacity: int, compute_s: float) -> None:
            stats["batches"] += 1
            stats["texts"] += texts
            stats["calls"] += texts
            stats["capacity"] = capacity
            show()

        def on_result(result: Any) -> None:
            stats["flips"] += result.flip is not None or result.flip_cost == 0
            progress.update(task, advance=1)
            show()

        if prepared.config.drivers > 1:  # the drivers report prompts done and calls as they go
            from margin.runs.drivers import execute_drivers

            def on_progress(done: int, calls: int) -> None:
                rate = calls / max(time.monotonic() - started, 1e-9)
                progress.update(task, completed=done,
                                info=f"{prepared.config.drivers} drivers  guard calls {calls} ({rate:,.0f}/s)")

            return execute_drivers(prepared, out_dir, resume=resume, on_progress=on_progress)
        return execute(prepared, out_dir, resume=resume, on_call=on_call, on_result=on_result,
                       on_batch=on_batch)


def print_summary(outcome: Any) -> None:
    from margin.reports.tables import margins_table

    figures = outcome.figures
    adaptive = outcome.snapshot["meta"]["protocol"] != "margin-flip-cost/1"
    title = f"margin — {outcome.snapshot['data'][0]['id']}" + (
        " — ADAPTIVE (upper bounds; not comparable with standard-suite margins)" if adaptive else "")
    table = margins_table(outcome.snapshot["data"][0], title)  # figures with their 95% intervals
    # Three counts that differ: what the searches asked, what was sent, what needed no call.
    table.add_row("texts the searches asked about", f"{sum(r.guard_calls for r in outcome.results):,}")
    table.add_row("guard calls sent (retries, hedges)", f"{outcome.guard_calls:,}")
    table.add_row("answered without a call (cache, repeats)", f"{outcome.cache_hits:,}")
    if figures.batches:
        rate = outcome.guard_calls / figures.search_s if figures.search_s else 0.0
        table.add_row("calls per second", f"{rate:,.0f}")
        if figures.streamed:
            p50, p95 = figures.latency(0.5), figures.latency(0.95)
            table.add_row("request latency p50 / p95 s", f"{p50 or 0:.3f} / {p95 or 0:.3f}")
            table.add_row("retries / hedges / 429-503", f"{figures.retries} / {figures.hedges} / {figures.overloads}")
            if figures.lowest_concurrency is not None:
                table.add_row("lowest concurrency", f"{figures.lowest_concurrency:.0f}")
            table.add_row("wall s", f"{figures.search_s:.1f}")
        else:
            table.add_row("mean batch fill %", fmt(100 * (figures.mean_fill or 0.0), 1))
            table.add_row("guard compute / wall s", f"{figures.compute_s:.1f} / {figures.search_s:.1f}")
            if figures.retries:
                table.add_row("retries", str(figures.retries))
    if figures.restarts:
        table.add_row("guard actor restarts", str(figures.restarts))
    if figures.timeouts:
        table.add_row("calls past --call-timeout", str(figures.timeouts))
    console.print(table)
    console.print(f"wrote {outcome.out_dir}/ (receipts.jsonl, results.jsonl, snapshot.json, curves.png/.svg); "
                  f"margin report {outcome.out_dir} for slices, coverage and flips")


@app.command()
def merge(
    dirs: Annotated[list[Path], typer.Argument(help="run folders: shards, then retries (a later folder wins)")],
    out: Annotated[Path, typer.Option(help="folder for the merged run")],
    dataset: Annotated[str | None, typer.Option(help="the runs' dataset, if it moved since (checked by SHA-256)")] = None,
    max_missing: Annotated[str, typer.Option(help="fail past this share of prompts without a verdict")] = "1%",
) -> None:
    """Join shard and retry run folders into one run (results, receipts, snapshot, curves)."""
    from margin.runs.merge import merge_runs
    from margin.runs.run import CoverageError, check_coverage

    share = parse_share(max_missing, "--max-missing")
    outcome = merge_runs(dirs, out, dataset)
    report = outcome.report
    console.print(f"merged {len(dirs)} run folders into {out}/: {len(outcome.results)} prompts, "
                  f"{outcome.replaced} replaced by a later folder, {outcome.absent} in no folder")
    console.print(f"balanced margin {fmt(report.balanced_margin)}  unsafe {fmt(report.unsafe_margin)}  "
                  f"safe {fmt(report.safe_margin)}  missing {sum(report.missing.values())}")
    try:
        check_coverage(outcome.results, share)
    except CoverageError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None



@app.command()
def ablate(
    guard: Annotated[str, typer.Option(help="a preset (margin guards list) | keyword | minilm | "
                                            "python:FILE.py:Class | a guard file (.yaml)")],
    defences: Annotated[str, typer.Option(help="comma-separated: none, nfkc, strip-format, strip-marks, skeleton, "
                                               "decode, all, or compositions such as nfkc+skeleton")] = (
        "none,nfkc,strip-format,skeleton,strip-marks,decode,all"),
    dataset: Annotated[str, typer.Option(help="sample | xstest | PATH (.csv, .jsonl, .parquet)")] = "sample",
    suite: Annotated[str, typer.Option(help="standard | quick | PATH to a suite YAML")] = "standard",
    budget: Annotated[float, typer.Option(help="largest tested cost B")] = 100.0,
    search: Annotated[str, typer.Option(help="exhaustive (per-family effectiveness) | cheapest (margins only)")] = "exhaustive",
    seed: Annotated[int, typer.Option(help="seed for every transform")] = 0,
    limit: Annotated[int | None, typer.Option(help="only the first N prompts")] = None,
    cost_norm: Annotated[str, typer.Option(help="corpus | prompt")] = "corpus",
    batch_size: Annotated[int, typer.Option(help="texts per guard call")] = 64,
    out: Annotated[Path | None, typer.Option(help="output folder (default runs/ablate-<guard>-<time>)")] = None,
    backend: Annotated[str | None, typer.Option(help="transformers | vllm | openai (the preset's default)")] = None,
    model: Annotated[str | None, typer.Option(help="checkpoint or served model name; REPO@COMMIT pins")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL (--backend openai)")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="NAME of the env var holding the API key")] = None,
    threshold: Annotated[float | None, typer.Option(help="unsafe when p_unsafe >= this (default 0.5)")] = None,
    engine: Annotated[str, typer.Option(help="ray (guard actors) | local (this process, no Ray)")] = "ray",
    ray_address: Annotated[str | None, typer.Option(help="run on this Ray cluster (default: $RAY_ADDRESS, else a local Ray)")] = None,
    replicas: Annotated[int | None, typer.Option(help="guard actors (data parallelism)")] = None,
    num_cpus: Annotated[float | None, typer.Option(help="CPUs per guard actor")] = None,
    num_gpus: Annotated[float | None, typer.Option(help="GPUs per guard actor")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="neither read nor write the verdict cache")] = False,
    max_missing: Annotated[str, typer.Option(help="fail past this share of prompts without a verdict (1% or 0.01)")] = "1%",
    max_attempts: Annotated[int, typer.Option(help="attempts per text before it counts as missing")] = 3,
    call_timeout: Annotated[float, typer.Option(help="seconds a guard batch may take before it counts as hung")] = 300.0,
) -> None:
    """One run per defence in front of the guard, on shared candidates: margins, changes against
    none with paired intervals, what each defence closes per family, and what it costs."""
    from margin.guards.make import parse_guard_spec
    from margin.reports.tables import ablation_tables
    from margin.runs.ablate import parse_defences, prepare_ablation, run_ablation
    from margin.runs.run import (
        CoverageError,
        RunConfig,
        check_coverage,
        check_out_dir,
        default_out_dir,
        execute,
    )

    chosen = parse_defences(defences)
    if max_attempts < 1:
        raise InputError("must be at least 1", field="--max-attempts")
    spec = parse_guard_spec(guard, backend=backend, model=model, base_url=base_url, api_key_env=api_key_env,
                            threshold=threshold, replicas=replicas, num_cpus=num_cpus, num_gpus=num_gpus)
    config = RunConfig(guard=spec, dataset=dataset, suite=suite, budget=budget, search=search, seed=seed,
                       limit=limit, cost_norm=cost_norm,  # type: ignore[arg-type]
                       batch_size=batch_size, engine=engine,  # type: ignore[arg-type]
                       ray_address=ray_address, cache=not no_cache,
                       max_missing=parse_share(max_missing, "--max-missing"), max_attempts=max_attempts,
                       call_timeout_s=call_timeout)
    prepared = prepare_ablation(config, chosen)
    out_dir = out or default_out_dir(f"ablate-{spec.id or guard}")
    check_out_dir(out_dir)

    def one(run: Any, folder: Path) -> Any:
        return execute_with_progress(run, folder, False, execute)

    def start(defence: Any, index: int, total: int) -> None:
        err.print(f"[{index + 1}/{total}] {defence.label}", highlight=False)

    outcome = run_ablation(prepared, out_dir, families=_families(), execute_one=one, on_start=start)
    _print_tables(ablation_tables(outcome.record))
    console.print(f"wrote {out_dir}/: one run folder per defence, {', '.join(p.name for p in outcome.files)}")
    failed = []
    for (defence, _), result in zip(prepared, outcome.outcomes, strict=True):
        try:
            check_coverage(result.results, config.max_missing)
        except CoverageError as exc:
            failed.append(f"{defence.label}: {exc}")
    if failed:
        err.print("error: " + " | ".join(failed), markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)


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
def guards_list(as_json: Annotated[bool, typer.Option("--json", help="machine-readable")] = False) -> None:
    """Guards and presets, with family, backends and label semantics."""
    from margin.guards.spec import BUILTIN

    rows: list[dict[str, Any]] = [
        {"name": g.name, "family": g.family, "description": g.description, "checkpoint": g.checkpoint,
         "revision": g.revision, "default_backend": g.default_backend, "backends": list(g.backends),
         "labels": g.labels} for g in BUILTIN.values()]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    table = Table()
    for column in ("name", "family", "checkpoint", "backends"):
        table.add_column(column)
    for r in rows:
        table.add_row(r["name"], r["family"], r["checkpoint"], ", ".join(r["backends"]))
    console.print(table)


def _families() -> dict[str, str]:
    from margin.transforms.registry import registry

    return {name: t.info.family for name, t in registry().items()}


def _print_tables(tables: list[Any]) -> None:
    for table in tables:
        console.print(table)


@app.command()
def score(
    inputs: Annotated[list[Path], typer.Argument(help="run folders and/or receipts or verdict JSONL files; "
                                                      "a later file wins on a collision")],
    out: Annotated[Path | None, typer.Option(help="write results, snapshot, curves and analyses here")] = None,
    dataset: Annotated[str | None, typer.Option(help="dataset the verdicts were made on (default: run.json's)")] = None,
    suite: Annotated[str | None, typer.Option(help="suite the verdicts were made with (default: run.json's)")] = None,
    budget: Annotated[float | None, typer.Option(help="budget B (default: run.json's, else 100)")] = None,
    cost_norm: Annotated[str | None, typer.Option(help="corpus | prompt (default: run.json's, else corpus)")] = None,
    seed: Annotated[int | None, typer.Option(help="transform seed (default: run.json's, else 0)")] = None,
    search: Annotated[str | None, typer.Option(help="cheapest | exhaustive (default: run.json's)")] = None,
    limit: Annotated[int | None, typer.Option(help="only the first N prompts (default: run.json's)")] = None,
    guard_id: Annotated[str | None, typer.Option(help="guard id for verdicts made elsewhere")] = None,
    flips: Annotated[int, typer.Option(help="cheapest flips to list")] = 10,
) -> None:
    """Recompute results, snapshot and analyses from recorded verdicts, calling no guard."""
    from margin.reports.analyses import analyse, analysis_files
    from margin.reports.observations import coverage
    from margin.reports.tables import run_tables
    from margin.runfolder import read_records
    from margin.runs.score import ScoreOptions, rescore, write_rescore

    options = ScoreOptions(dataset=dataset, suite=suite, budget=budget, cost_norm=cost_norm, seed=seed,
                           search=search, limit=limit, guard_id=guard_id)
    rescored = rescore(inputs, options)
    analyses = analyse(rescored.observations, rescored.prepared.config.budget,
                       exhaustive=rescored.exhaustive, families=_families())
    receipts = [line for path in inputs for line in read_records(path / "receipts.jsonl" if path.is_dir() else path)]
    calls = coverage(receipts)
    _print_tables(run_tables(rescored.snapshot["data"][0], rescored.results, calls if calls.candidates else None,
                             analyses, flips=flips))
    if rescored.unmatched:
        err.print(f"note: {len(rescored.unmatched)} recorded verdicts match no rebuilt candidate "
                  f"(first at {rescored.unmatched[0].where}): another dataset, suite, seed or limit?")
    if rescored.differs_from_run is not None:
        same = not rescored.differs_from_run
        console.print("rescored results match the run's results.jsonl" if same else
                      f"rescored results differ from the run's for {len(rescored.differs_from_run)} prompts, "
                      f"e.g. {rescored.differs_from_run[:5]}")
    if out is not None:
        written = write_rescore(rescored, out, analysis_files(analyses))
        if "effectiveness" in analyses:
            from margin.reports.plots import heatmap_figure, save
            from margin.reports.publish import effectiveness_grid

            rows, columns, values = effectiveness_grid({rescored.guard.id: analyses["effectiveness"]})
            written += save(heatmap_figure(rows, columns, values, f"{rescored.guard.id}: flip rate per transform"),
                            out / "effectiveness")
        console.print(f"wrote {out}/ ({', '.join(p.name for p in written)})")


@app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="a run folder")],
    flips: Annotated[int, typer.Option(help="cheapest flips to list")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="print the figures and analyses as JSON")] = False,
) -> None:
    """Margins with CIs, slices, coverage, cheapest flips; invariance, effectiveness and the
    threshold sweep for exhaustive runs."""
    from margin.reports.analyses import analyse
    from margin.reports.observations import coverage, from_receipts
    from margin.reports.snapshot import record, snapshot_entry
    from margin.reports.tables import run_tables
    from margin.runfolder import load_run

    run = load_run(run_dir)
    receipts = list(run.receipts()) if run.receipts_path.is_file() else []
    entry = snapshot_entry(run.guard, run.results, run.budget,
                           {"search": run.search, "seed": run.manifest.get("seed")})
    rec = record(entry, 1)
    observations = from_receipts(receipts, run.results)
    exhaustive = run.search == "exhaustive" and all(o.complete for o in observations)
    analyses = analyse(observations, run.budget, exhaustive=exhaustive, families=_families())
    covered = coverage(receipts) if receipts else None
    if as_json:
        from margin.reports.tables import cheapest_flips, coverage_record
        from margin.runfolder import flip_record

        cheapest = [{"prompt_id": r.prompt_id, "label": r.label, **(flip_record(r.flip) or {})}
                    for r in cheapest_flips(run.results, flips)]
        document = {"guard": rec, "coverage": coverage_record(run.results, covered), "cheapest_flips": cheapest,
                    **analyses}
        sys.stdout.write(json.dumps(document, ensure_ascii=False) + "\n")
        return
    _print_tables(run_tables(rec, run.results, covered, analyses, flips=flips))
    if run.search != "exhaustive":
        console.print("invariance, per-transform effectiveness and the threshold sweep need --search exhaustive")


@app.command()
def publish(
    inputs: Annotated[list[Path], typer.Argument(help="run folders, and paired-study outputs (pairings.json)")],
    out: Annotated[Path, typer.Option(help="folder for the snapshots and plots")],
    base_url: Annotated[str | None, typer.Option(help="URL prefix for meta.snapshot_url")] = None,
    date: Annotated[str | None, typer.Option(help="snapshot date YYYY-MM-DD (default today, UTC)")] = None,
) -> None:
    """A ranked leaderboard snapshot (and a pairings snapshot from studies), immutable and
    named by date and content hash. Refuses runs that differ in dataset, suite, budget or cost norm."""
    import datetime as dt

    from margin.reports.publish import publish as do_publish
    from margin.reports.tables import leaderboard_table

    try:
        day = dt.date.fromisoformat(date) if date else None
    except ValueError:
        raise InputError(f"expected YYYY-MM-DD, got {date!r}", field="--date") from None
    published = do_publish(inputs, out, base_url=base_url, date=day, families=_families())
    if published.leaderboard:
        console.print(leaderboard_table(published.leaderboard))
    if published.pairings:
        counts = [d["status"] for d in published.pairings["data"]]
        console.print(f"pairings: {len(counts)} pairs, {counts.count('bypass_found')} with a bypass found")
    for path in published.files:
        console.print(f"wrote {path}")


@app.command()
def site(
    publish_dir: Annotated[Path, typer.Argument(help="the folder margin publish --out wrote")],
    out: Annotated[Path, typer.Option(help="folder for the static site (replaced whole if margin built it)")],
    base_url: Annotated[str | None, typer.Option(help="where the site will live (https://...): the API's "
                                                      "meta.snapshot_url points under it")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="then serve it on 127.0.0.1 until Ctrl-C")] = False,
    port: Annotated[int, typer.Option(help="port for --serve (0: any free port)")] = 8000,
) -> None:
    """The leaderboard site: pages, the JSON API and the immutable snapshots, as a static folder."""
    from margin.site.build import check_base_url, check_out_dir, site_files, write_site
    from margin.site.inputs import load_publish_dir

    base = check_base_url(base_url)
    inputs = load_publish_dir(publish_dir)
    check_out_dir(out)
    server = None
    if serve:
        from margin.site.serve import make_server

        try:
            server = make_server(out, port)
        except OSError as exc:
            raise InputError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})", field="--port") from None
        base = base or f"http://127.0.0.1:{server.server_port}"
    files = site_files(inputs, base)
    write_site(out, files)
    for kind, snaps in inputs.snapshots.items():
        console.print(f"{kind}: current {snaps[0].name}" + (f", {len(snaps) - 1} archived" if len(snaps) > 1 else ""))
    pages = [name for name in ("index.html", "pairings.html", "methodology.html", "archive.html") if name in files]
    endpoints = [path for path in files if path.startswith("api/") and not path.endswith(".json")]
    console.print(f"wrote {out}/ ({len(files)} files: {', '.join(pages + endpoints)})", soft_wrap=True)
    if server is not None:
        print(f"serving http://127.0.0.1:{server.server_port}/ (Ctrl-C to stop)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()


@app.command()
def integral(
    inputs: Annotated[list[Path], typer.Argument(help="run folders: one per guard and dataset")],
    group: Annotated[list[str] | None, typer.Option(help="NAME=DATASET,DATASET (repeatable); other datasets "
                                                         "are groups of their own")] = None,
    at_budget: Annotated[float, typer.Option(help="read FPR/FNR at this budget (0: original prompts)")] = 0.0,
    out: Annotated[Path | None, typer.Option(help="write integral.json and the FPR vs FNR scatter here")] = None,
) -> None:
    """The integral score across datasets (harmonic per dataset and group, geometric overall)."""
    from margin.reports.integral import integral_from_runs, integral_record, parse_groups
    from margin.reports.tables import integral_table
    from margin.runfolder import load_run

    if at_budget < 0:
        raise InputError("must be at least 0", field="--at-budget")
    table = integral_from_runs([load_run(p) for p in inputs], parse_groups(group or []), at_budget)
    console.print(integral_table(table.scores, table.datasets, table.groups, at_budget))
    if out is not None:
        from margin.reports.plots import fpr_fnr_figure, save
        from margin.runfolder import atomic_write_text, dumps

        atomic_write_text(out / "integral.json", dumps(integral_record(table)) + "\n")
        files = save(fpr_fnr_figure([(s.guard_id, s.fpr_avg, s.fnr_avg) for s in table.scores]), out / "fpr_fnr")
        console.print(f"wrote {out / 'integral.json'}, {', '.join(str(f) for f in files)}")


@app.command()
def study(
    config: Annotated[Path, typer.Argument(help="the study's YAML config (see studies/)")],
    out: Annotated[Path | None, typer.Option(help="output folder (default runs/study-<name>-<time>)")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="continue the killed study in --out")] = False,
    engine: Annotated[str, typer.Option(help="ray (model, judge and guard actors) | local (this process)")] = "ray",
    ray_address: Annotated[str | None, typer.Option(help="run on this Ray cluster: auto | HOST:PORT | ray://HOST:PORT (default: $RAY_ADDRESS, else a local Ray)")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="neither read nor write the verdict and response caches")] = False,
) -> None:
    """A paired study: guards x protected models x transformations, judged; writes pairings.json."""
    from margin.studies.plan import prepare
    from margin.studies.report import evidence_tables, pairs_table

    if engine not in ("ray", "local"):
        raise InputError(f"unknown engine {engine!r}; expected ray or local", field="--engine")
    if resume and out is None:
        raise InputError("--resume needs --out, the folder of the study to continue", field="--resume")
    plan = prepare(config)
    from margin.studies.runner import (
        CoverageError,
        check_coverage,
        check_out_dir,
        default_out_dir,
        run_study,
    )

    out_dir = out or default_out_dir(plan)
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
                                ray_address=ray_address, cache=not no_cache, on_stage=on_stage,
                                on_batch=on_batch)
    except RuntimeError as exc:  # an actor or guard that cannot start: say so in one line
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None
    for table in evidence_tables(outcome.pairings):
        console.print(table)
    console.print(pairs_table(outcome.pairings))
    calls = outcome.calls
    guard_calls = sum(s.sent for s in outcome.guards.values())
    console.print(f"guard calls {guard_calls} (cache hits {sum(s.cache_hits for s in outcome.guards.values())}), "
                  f"model and judge calls {calls.sent} (cache hits {calls.cached}, replayed {calls.replayed}, "
                  f"missing {calls.missing})")
    console.print(f"wrote {out_dir}/ (pairings.json, cases.jsonl, pairing-matrix.png, capability-ladder.png, "
                  f"receipts)")
    try:
        check_coverage(outcome, plan.config.runtime.max_missing)
    except CoverageError as exc:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1) from None


def main() -> None:
    try:
        code = app(standalone_mode=False)  # a command's typer.Exit(n) comes back as n here
        if isinstance(code, int) and code:
            sys.exit(code)
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
