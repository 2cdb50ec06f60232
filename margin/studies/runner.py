"""A whole paired study: plan -> input guard verdicts -> responses and judge verdicts ->
output guard verdicts -> pairings.

`run_study` checks the output folder before anything starts, writes `study.json` (the
manifest a resume must match) once the runtime is up, collects every input guard's verdicts
through the search engine, then every model's responses and every judge verdict through the
model actors, then every output guard's verdicts on those responses, and `finish`
(`margin.studies.results`) turns them into rates, the pairings snapshot, per-prompt cases
and the two plots. Everything in `finish` is a pure function of the collected outputs, so
a killed study resumed with `--resume` ends with the same pairings.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from margin.engine.cluster import connect, disconnect
from margin.engine.settings import ENGINE
from margin.errors import CoverageError, EndpointUnreachable, InputError
from margin.runfolder import dumps
from margin.serving.calls import CallSettings
from margin.serving.guard_pool import is_remote
from margin.studies.health import ModelUnavailable
from margin.studies.plan import StudyPlan
from margin.studies.record import read_study_record
from margin.studies.responses import OnBatch, collect
from margin.studies.results import StudyOutcome, finish
from margin.studies.verdicts import GuardPhase
from margin.util.folderlock import entries, hold
from margin.util.safefiles import atomic_write_bytes, atomic_write_text

Engine = Literal["ray", "local"]


def check_coverage(outcome: StudyOutcome, max_missing: float) -> None:
    share = outcome.missing_share()
    if share > max_missing:
        parts = ", ".join(f"{kind} {m} of {t}" for kind, (m, t) in outcome.missing.items() if m)
        reasons = dict.fromkeys(d.coverage.reason for d in outcome.snapshot.data
                                if d.coverage is not None and d.coverage.reason)
        raise CoverageError(f"{100 * share:.1f}% of the outputs are missing after every retry ({parts}), above "
                            f"runtime.max_missing {100 * max_missing:g}%; first errors: {'; '.join(reasons) or '—'} "
                            f"(all are in the receipts; rerun with --resume to retry them)")


def default_out_dir(plan: StudyPlan) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return Path("runs") / f"study-{plan.config.name}-{stamp}"


def check_out_dir(plan: StudyPlan, out_dir: Path, resume: bool) -> None:
    """Refuse a used folder, or a --resume folder of another study, before anything starts."""
    if not resume:
        if out_dir.exists() and (not out_dir.is_dir() or entries(out_dir)):
            raise InputError("output folder exists and is not empty; choose another --out (or add --resume)",
                             path=out_dir, field="--out")
        return
    saved_path = out_dir / "study.json"
    if not saved_path.is_file():
        raise InputError("not a study folder (no study.json) to resume", path=out_dir, field="--resume")
    saved = read_study_record(saved_path)
    changed = saved.differences(plan.record())
    if changed:
        # A study begun before prompts.limit took a stratified sample took the first N.
        first_n = "limit_sample" in changed and saved.limit_sample is None
        hint = "; it took the first prompts.limit prompts: list them as prompts.ids, with no limit, to resume it" if first_n else ""
        raise InputError(f"cannot resume: the config changed since the study began ({', '.join(changed)}){hint}",
                         path=saved_path)


def call_settings(plan: StudyPlan, engine: Engine, ray_address: str | None) -> CallSettings:
    """How the study's calls are made: its `runtime` keys (None: each endpoint's own
    `backend_options`, then the defaults)."""
    return CallSettings.of_runtime(plan.config.runtime, engine=engine, ray_address=ray_address)


def in_process(plan: StudyPlan) -> list[str]:
    """The guards and models that run in process (Ray actors, or this process with `--engine
    local`), not behind an endpoint."""
    guards = [f"guard {g.id}" for stack in plan.guards for g in (stack.input, stack.output)
              if g is not None and not is_remote(g.spec)]
    models = [f"model {m.id}" for m in [*plan.models, *(j.model for j in plan.judges if j.model is not None)] if not m.spec.remote]
    return guards + models


def check_call_timeout(plan: StudyPlan, settings: CallSettings) -> None:
    """`runtime.call_timeout_s` is honoured by endpoints and Ray actors; with `--engine local`
    a batch in this process cannot be stopped, so a study that has one is refused (exit 2,
    naming the key) rather than run without the limit."""
    local = in_process(plan)
    if settings.timeout_cannot_apply(in_process=bool(local)):
        raise plan.source.error(f"{local[0]} runs in this process (--engine local), where a batch cannot be "
                                "stopped: use --engine ray, or leave call_timeout_s out", ("runtime", "call_timeout_s"))


def run_study(plan: StudyPlan, out_dir: Path, *, resume: bool = False, engine: Engine = ENGINE.default,
              ray_address: str | None = None, cache: bool = True, on_stage: Callable[[str], None] = lambda _: None,
              on_batch: OnBatch = lambda *_: None) -> StudyOutcome:
    """The study in `out_dir`, its folder locked throughout (`margin.util.folderlock`): a
    second study or `--resume` of the same folder is refused while this one writes it."""
    if not out_dir.is_dir():  # a --resume of no folder fails here, and no folder is made for it
        check_out_dir(plan, out_dir, resume)
    with hold(out_dir, what="study folder") as held:
        check_out_dir(plan, out_dir, resume)  # again, now that no one else writes it
        return _run_study(plan, out_dir, made=held.made, resume=resume, engine=engine, ray_address=ray_address,
                          cache=cache, on_stage=on_stage, on_batch=on_batch)


def _run_study(plan: StudyPlan, out_dir: Path, *, made: bool, resume: bool, engine: Engine, ray_address: str | None,
               cache: bool, on_stage: Callable[[str], None], on_batch: OnBatch) -> StudyOutcome:
    settings = call_settings(plan, engine, ray_address)
    check_call_timeout(plan, settings)
    started_ray = False
    guards = GuardPhase(plan, out_dir, settings=settings, resume=resume, cache=cache, on_stage=on_stage,
                        on_batch=on_batch)
    try:
        if engine == "ray" and in_process(plan):
            started_ray = connect(ray_address)
        if not resume:
            out_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out_dir / "study.json", dumps(plan.record().to_json()) + "\n")
            atomic_write_bytes(out_dir / "config.yaml", plan.source.path.read_bytes())
        guards.inputs()
        on_stage("models and judges")
        calls = collect(plan, out_dir, settings=settings, resume=resume, cache=cache, on_batch=on_batch)
        guards.outputs(calls.responses)
    except ModelUnavailable as exc:
        raise ModelUnavailable(f"{exc}. The study stopped; once it answers, finish it with: margin study "
                               f"{plan.source.path} --out {out_dir} --resume") from None
    except EndpointUnreachable:
        if not resume:  # an endpoint that was never there: leave no half-made study folder
            _remove_start(out_dir, made)
        raise
    finally:
        disconnect(started_ray)
    on_stage("rates")
    verdicts = guards.verdicts()
    outcome_ = finish(plan, out_dir, verdicts, calls)
    outcome_.guards = guards.stats
    every = [v for stack in verdicts.values() for per in (stack.inputs, stack.outputs) if per is not None
             for v in per.values()]
    outcome_.missing = {
        "guard verdicts": (sum(v is None for v in every), len(every)),
        "responses": (sum(r is None for r in calls.responses.values()), len(calls.responses)),
        "judge outputs": (sum(j is None for j in calls.judgements.values()), len(calls.judgements)),
    }
    return outcome_


def _remove_start(out_dir: Path, made: bool) -> None:
    """Remove what a new study wrote before it failed: the folder was empty when it started
    and locked since, so all it holds is this study's (the folder too, if it made it)."""
    if made:
        shutil.rmtree(out_dir, ignore_errors=True)
        return
    for entry in entries(out_dir):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


