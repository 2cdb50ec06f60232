"""A whole paired study: plan -> guard verdicts -> responses and judge verdicts -> pairings.

`run_study` checks the output folder before anything starts, writes `study.json` (the
manifest a resume must match) once the runtime is up, collects every guard's verdicts
through the search engine, then every model's responses and every judge verdict through the
model actors, and `finish` turns them into rates, the pairings snapshot, per-prompt cases
and the two plots. Everything in `finish` is a pure function of the collected outputs, so
a killed study resumed with `--resume` ends with the same pairings.
"""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from margin.datasets.completions import comply
from margin.engine.cluster import connect, disconnect
from margin.engine.settings import ENGINE
from margin.errors import CoverageError, EndpointUnreachable, InputError
from margin.judges.agreement import agreement
from margin.judges.rules import RuleJudge
from margin.judges.verdicts import JudgeVerdict
from margin.reports.bootstrap import BootstrapSpec
from margin.reports.pairings import PROTOCOL, PairOutcome, build_pairings, validate_pairings
from margin.runfolder import dumps
from margin.serving.calls import CallSettings
from margin.serving.guard_pool import is_remote
from margin.studies.coverage import guard_error, pair_coverages
from margin.studies.health import ModelUnavailable
from margin.studies.plan import StudyPlan, Transformation
from margin.studies.rates import Row, outcome
from margin.studies.record import read_study_record
from margin.studies.responses import OnBatch, ResponseOutcome, collect
from margin.studies.verdicts import GuardStats, Verdicts, guard_verdicts
from margin.util.folderlock import entries, hold
from margin.util.safefiles import atomic_write_bytes, atomic_write_text, slug

Engine = Literal["ray", "local"]
PRESERVATION_UNITS = "every prompt of the subset with both responses and a judge output"


@dataclass
class StudyOutcome:
    out_dir: Path
    pairings: dict[str, Any]
    guards: dict[str, GuardStats] = field(default_factory=dict)
    calls: ResponseOutcome = field(default_factory=ResponseOutcome)
    files: list[Path] = field(default_factory=list)
    missing: dict[str, tuple[int, int]] = field(default_factory=dict)  # kind -> (missing, asked for)

    def missing_share(self) -> float:
        lost, total = (sum(m for m, _ in self.missing.values()), sum(t for _, t in self.missing.values()))
        return lost / total if total else 0.0


def check_coverage(outcome: StudyOutcome, max_missing: float) -> None:
    share = outcome.missing_share()
    if share > max_missing:
        parts = ", ".join(f"{kind} {m} of {t}" for kind, (m, t) in outcome.missing.items() if m)
        reasons = dict.fromkeys(c["reason"] for d in outcome.pairings["data"]
                                if (c := d.get("coverage")) and c.get("reason"))
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
    guards = [f"guard {g.id}" for g in plan.guards if not is_remote(g.spec)]
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


def guard_folder(out_dir: Path, index: int, guard_id: str) -> Path:
    return out_dir / "guards" / f"{index:02d}-{slug(guard_id)}"


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
    verdicts: dict[str, Verdicts] = {}
    guard_stats: dict[str, GuardStats] = {}
    try:
        if engine == "ray" and in_process(plan):
            started_ray = connect(ray_address)
        if not resume:
            out_dir.mkdir(parents=True, exist_ok=True)
            atomic_write_text(out_dir / "study.json", dumps(plan.record().to_json()) + "\n")
            atomic_write_bytes(out_dir / "config.yaml", plan.source.path.read_bytes())
        for index, guard in enumerate(plan.guards):
            on_stage(f"guard {guard.id}")

            def guard_batch(texts: int, _capacity: int, compute_s: float, gid: str = guard.id) -> None:
                on_batch(gid, texts, compute_s)

            folder = guard_folder(out_dir, index, guard.id)
            verdicts[guard.id], guard_stats[guard.id] = guard_verdicts(
                plan, guard, folder, settings=settings, resume=resume, cache=cache, on_batch=guard_batch)
            if verdicts[guard.id] and all(v is None for v in verdicts[guard.id].values()):
                raise ModelUnavailable(f"guard {guard.id} gave no verdict at all; its first error: "
                                       f"{guard_error(folder / 'receipts.jsonl') or 'no output'}")
        on_stage("models and judges")
        calls = collect(plan, out_dir, settings=settings, resume=resume, cache=cache, on_batch=on_batch)
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
    outcome_ = finish(plan, out_dir, verdicts, calls)
    outcome_.guards = guard_stats
    outcome_.missing = {
        "guard verdicts": (sum(v is None for per in verdicts.values() for v in per.values()),
                           sum(len(per) for per in verdicts.values())),
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


def rows_for(plan: StudyPlan, model_id: str, t: Transformation, verdicts: Verdicts,
             calls: ResponseOutcome) -> list[Row]:
    """One row per prompt for one guard (its `verdicts`), one model and one transformation."""
    name = t.name
    rows = []
    second = len(plan.judges) > 1
    for prompt in plan.prompts:
        original = verdicts.get((prompt.id, None))
        transformed = verdicts.get((prompt.id, name))
        first = calls.judgements.get((0, model_id, prompt.id, name))
        other = calls.judgements.get((1, model_id, prompt.id, name)) if second else None
        response_missing = (calls.responses.get((model_id, prompt.id, None)) is None
                            or calls.responses.get((model_id, prompt.id, name)) is None)
        text = plan.transformed(prompt, t)
        rows.append(Row(
            prompt_id=prompt.id,
            original_verdict=original.label if original else None,
            transformed_verdict=transformed.label if transformed else None,
            judgement=first.status if first else None,
            second_judgement=other.status if other else None,
            response_missing=response_missing,
            unchanged=text == prompt.text,
            cost=plan.cost(prompt, t),
        ))
    return rows


def finish(plan: StudyPlan, out_dir: Path, verdicts: dict[str, Verdicts], calls: ResponseOutcome,
           date: dt.date | None = None) -> StudyOutcome:
    spec = BootstrapSpec()
    pairs = []
    coverages = pair_coverages(plan, verdicts, calls, out_dir / "calls.jsonl",
                               {g.id: guard_folder(out_dir, i, g.id) / "receipts.jsonl" for i, g in enumerate(plan.guards)})
    for guard in plan.guards:
        for model in plan.models:
            outcomes = tuple(
                outcome(t.name, rows_for(plan, model.id, t, verdicts[guard.id], calls),
                        plan.thresholds, transform=t.transform, strength=t.strength,
                        second_judge=len(plan.judges) > 1, spec=spec)
                for t in plan.transformations)
            pairs.append(PairOutcome(guard.id, model.id, outcomes, coverages[(guard.id, model.id)]))
    first = plan.judges[0]
    parse_rule = first.judge.format if isinstance(first.judge, RuleJudge) else first.judge.template.format
    judge = {**first.judge.identity(), "parse_rule": parse_rule,
             "second": plan.judges[1].judge.identity() if len(plan.judges) > 1 else None}
    # only where given, so that a study without them keeps its bytes
    if first.validation is not None:
        judge["validation"] = first.validation
    if first.min_kappa is not None:
        judge["min_kappa"] = first.min_kappa
    if len(plan.judges) > 1:
        second_judge = {**judge["second"]}
        if plan.judges[1].validation is not None:
            second_judge["validation"] = plan.judges[1].validation
        judge["second"] = second_judge
        judge["inter_judge"] = inter_judge(plan, calls)
    pairings = build_pairings(pairs, judge=judge, guards=[g.record() for g in plan.guards],
                              models=[m.metadata for m in plan.models], thresholds=plan.thresholds, date=date)
    pairings["meta"]["study"] = {
        "protocol": PROTOCOL,
        "name": plan.config.name,
        "dataset": {"name": plan.dataset.name, "sha256": plan.dataset.sha256},
        "prompts": len(plan.prompts),
        "prompt_ids": [p.id for p in plan.prompts],
        **({} if plan.limit_sample is None else {"limit_sample": plan.limit_sample.to_json()}),
        "transformations": [{"name": t.name, "transform": t.transform, "strength": t.strength}
                            for t in plan.transformations],
        "seed": plan.seed,
        "generation": {"decoding": "greedy", "max_tokens": plan.config.generation.max_tokens},
        "units": {
            "evasion": "prompts whose original verdict is unsafe and whose transformed verdict exists; "
                       "counts when the transformed verdict is safe (invalid is not an allow)",
            "regression": "prompts whose original verdict is safe and whose transformed verdict exists; "
                          "counts when the transformed verdict is unsafe or invalid",
            "preservation": PRESERVATION_UNITS + "; unparseable judge output counts as not preserved",
            "missing": "no output after every retry: left out of every denominator and counted",
        },
        "confidence_intervals": {"method": "Wilson score interval of each rate over its units",
                                 "level": spec.level},
        "config_sha256": plan.source.sha256,
    }
    pairings = validate_pairings(pairings, out_dir / "pairings.json")
    atomic_write_text(out_dir / "pairings.json", dumps(pairings) + "\n")
    files = [out_dir / "pairings.json", *write_cases(plan, out_dir, verdicts, calls)]
    files += write_plots(pairings, out_dir)
    return StudyOutcome(out_dir, pairings, calls=calls, files=files)


def inter_judge(plan: StudyPlan, calls: ResponseOutcome) -> dict[str, Any]:
    """The two judges' agreement with each other over every case both judged."""
    both = []
    for model in plan.models:
        for t in plan.transformations:
            for prompt in plan.prompts:
                a = calls.judgements.get((0, model.id, prompt.id, t.name))
                b = calls.judgements.get((1, model.id, prompt.id, t.name))
                if a is not None and b is not None:
                    both.append((a, b))
    return judges_agreement(both)


def judges_agreement(both: Sequence[tuple[JudgeVerdict, JudgeVerdict]]) -> dict[str, Any]:
    """Cohen's kappa on comply vs not comply between two judges: each judgement reads two
    responses (original and transformed behaviour); a side either judge left without a
    behaviour (unparseable) is left out."""
    first, second = [], []
    for a, b in both:
        for side in ("original_behaviour", "transformed_behaviour"):
            x, y = getattr(a, side), getattr(b, side)
            if x is not None and y is not None:
                first.append(comply(x))
                second.append(comply(y))
    figures = agreement(first, second)
    return {"n": len(first), "cases": INTER_JUDGE_CASES, "kappa_comply": figures["kappa"].as_dict(),
            "accuracy_comply": figures["accuracy"].as_dict()}


INTER_JUDGE_CASES = ("responses both judges read (original and transformed side of each judged case), each "
                     "judge's behaviour mapped to comply (complies) vs not comply")


def write_cases(plan: StudyPlan, out_dir: Path, verdicts: dict[str, Verdicts], calls: ResponseOutcome) -> list[Path]:
    """One line per model x transformation x prompt: texts, responses, judge verdicts, guard verdicts."""
    lines = []
    for model in plan.models:
        for t in plan.transformations:
            for prompt in plan.prompts:
                original = calls.responses.get((model.id, prompt.id, None))
                transformed = calls.responses.get((model.id, prompt.id, t.name))
                judges = []
                for index, judge in enumerate(plan.judges):
                    v = calls.judgements.get((index, model.id, prompt.id, t.name))
                    judges.append({"id": judge.id, "status": v.status if v else None,
                                   "rationale": v.rationale if v else None,
                                   "original_behaviour": v.original_behaviour if v else None,
                                   "transformed_behaviour": v.transformed_behaviour if v else None,
                                   "same_request": v.same_request if v else None})
                guards = {}
                for guard in plan.guards:
                    before = verdicts[guard.id].get((prompt.id, None))
                    after = verdicts[guard.id].get((prompt.id, t.name))
                    guards[guard.id] = {"original": before.label if before else None,
                                        "transformed": after.label if after else None}
                lines.append(dumps({
                    "model": model.id, "transformation": t.name, "prompt_id": prompt.id, "label": prompt.label,
                    "transformed_prompt": plan.transformed(prompt, t),
                    "original_response": original.text if original else None,
                    "transformed_response": transformed.text if transformed else None,
                    "truncated": [bool(original and original.truncated), bool(transformed and transformed.truncated)],
                    "judges": judges, "guards": guards,
                }) + "\n")
    atomic_write_text(out_dir / "cases.jsonl", "".join(lines))
    return [out_dir / "cases.jsonl"]


def write_plots(pairings: dict[str, Any], out_dir: Path) -> list[Path]:
    from margin.reports.plots import capability_ladder_figure, pairing_matrix_figure, save

    name = pairings["meta"]["study"]["name"]
    return (save(pairing_matrix_figure(pairings, f"{name}: qualifying / tested transformations"),
                 out_dir / "pairing-matrix")
            + save(capability_ladder_figure(pairings, title=f"{name}: capability ladder"), out_dir / "capability-ladder"))
