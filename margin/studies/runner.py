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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from margin.datasets.completions import comply
from margin.engine.cluster import connect, disconnect
from margin.engine.settings import ENGINE
from margin.errors import CoverageError, EndpointUnreachable, InputError
from margin.judges.agreement import agreement
from margin.judges.rules import RuleJudge
from margin.judges.verdicts import JudgeStatus, JudgeVerdict
from margin.reports.bootstrap import BootstrapSpec
from margin.reports.pairings import PROTOCOL, PairOutcome, build_pairings, validate_pairings
from margin.runfolder import dumps
from margin.runs.executing.guard_pool import is_remote
from margin.runs.executing.session import CallSettings
from margin.studies.coverage import guard_error, pair_coverages
from margin.studies.health import ModelUnavailable
from margin.studies.plan import StudyPlan, Transformation
from margin.studies.rates import Layer, Row, outcome, stopped_by, through
from margin.studies.record import read_study_record
from margin.studies.responses import OnBatch, ResponseOutcome, Responses, collect
from margin.studies.verdicts import (
    GuardStats,
    OutputVerdicts,
    StackVerdicts,
    Verdicts,
    guard_verdicts,
    output_verdicts,
)
from margin.types import GuardInfo, Verdict, VerdictLabel
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
    runtime = plan.config.runtime
    return CallSettings(engine=engine, ray_address=ray_address, batch_size=runtime.batch_size,
                        retry_wait_s=runtime.retry_wait_s, max_attempts=runtime.max_attempts,
                        call_timeout_s=runtime.call_timeout_s, max_outage_s=runtime.max_outage_s)


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


class GuardPhase:
    """Every stack's guard verdicts: the input guards' before the models are asked, the output
    guards' once the responses are in. A guard two stacks share (the same identity, in the same
    role) is asked once, its receipts in the first stack's folder."""

    def __init__(self, plan: StudyPlan, out_dir: Path, *, settings: CallSettings, resume: bool, cache: bool,
                 on_stage: Callable[[str], None], on_batch: OnBatch) -> None:
        self.plan, self.out_dir = plan, out_dir
        self.settings, self.resume, self.cache = settings, resume, cache
        self.on_stage, self.on_batch = on_stage, on_batch
        self.by_input: dict[GuardInfo, Verdicts] = {}
        self.by_output: dict[GuardInfo, OutputVerdicts] = {}
        self.stats: dict[str, GuardStats] = {}

    def inputs(self) -> None:
        for index, stack in enumerate(self.plan.guards):
            guard = stack.input
            if guard is None or guard.info in self.by_input:
                continue
            self.on_stage(f"guard {guard.id}")
            folder = guard_folder(self.out_dir, index, stack.id)
            verdicts, self.stats[guard.id] = guard_verdicts(
                self.plan, guard, folder, settings=self.settings, resume=self.resume, cache=self.cache,
                on_batch=self._reporter(guard.id))
            _check_answered(guard.id, verdicts.values(), folder / "receipts.jsonl")
            self.by_input[guard.info] = verdicts

    def outputs(self, responses: Responses) -> None:
        for index, stack in enumerate(self.plan.guards):
            guard = stack.output
            if guard is None or guard.info in self.by_output:
                continue
            self.on_stage(f"output guard {guard.id}")
            folder = guard_folder(self.out_dir, index, stack.id)
            verdicts, self.stats[f"out:{guard.id}"] = output_verdicts(
                self.plan, guard, folder, responses, settings=self.settings, resume=self.resume, cache=self.cache,
                on_batch=self._reporter(guard.id))
            _check_answered(guard.id, verdicts.values(), folder / "output-receipts.jsonl")
            self.by_output[guard.info] = verdicts

    def verdicts(self) -> dict[str, StackVerdicts]:
        """Per stack id, what its guards said."""
        return {stack.id: StackVerdicts(None if stack.input is None else self.by_input[stack.input.info],
                                        None if stack.output is None else self.by_output[stack.output.info])
                for stack in self.plan.guards}

    def _reporter(self, guard_id: str) -> Callable[[int, int, float], None]:
        return lambda texts, _capacity, compute_s: self.on_batch(guard_id, texts, compute_s)


def _check_answered(guard_id: str, verdicts: Iterable[Verdict | None], receipts: Path) -> None:
    """A guard that gave no verdict at all stops the study (resumable once it answers)."""
    given = list(verdicts)
    if given and all(v is None for v in given):
        raise ModelUnavailable(f"guard {guard_id} gave no verdict at all; its first error: "
                               f"{guard_error(receipts) or 'no output'}")


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


def rows_for(plan: StudyPlan, model_id: str, t: Transformation, verdicts: StackVerdicts,
             calls: ResponseOutcome) -> list[Row]:
    """One row per prompt for one guard stack (its `verdicts`), one model and one transformation."""
    name = t.name
    rows = []
    second = len(plan.judges) > 1
    for prompt in plan.prompts:
        original, _ = through(_layers(verdicts, model_id, prompt.id, None))
        transformed, stopper = through(_layers(verdicts, model_id, prompt.id, name))
        first = calls.judgements.get((0, model_id, prompt.id, name))
        other = calls.judgements.get((1, model_id, prompt.id, name)) if second else None
        response_missing = (calls.responses.get((model_id, prompt.id, None)) is None
                            or calls.responses.get((model_id, prompt.id, name)) is None)
        text = plan.transformed(prompt, t)
        rows.append(Row(
            prompt_id=prompt.id,
            original_verdict=original,
            transformed_verdict=transformed,
            judgement=first.status if first else None,
            second_judgement=other.status if other else None,
            response_missing=response_missing,
            unchanged=text == prompt.text,
            cost=plan.cost(prompt, t),
            stopper=stopper,
        ))
    return rows


def _layers(verdicts: StackVerdicts, model_id: str, prompt_id: str,
            name: str | None) -> list[tuple[Layer, VerdictLabel | None]]:
    """What each guard of a stack said of one text (p, or T(p) for transformation `name`): the
    input guard of the text, the output guard of the model's response to it."""
    said: list[tuple[Layer, Verdict | None]] = []
    if verdicts.inputs is not None:
        said.append(("input_guard", verdicts.inputs.get((prompt_id, name))))
    if verdicts.outputs is not None:
        said.append(("output_guard", verdicts.outputs.get((model_id, prompt_id, name))))
    return [(layer, None if v is None else v.label) for layer, v in said]


def finish(plan: StudyPlan, out_dir: Path, verdicts: dict[str, StackVerdicts], calls: ResponseOutcome,
           date: dt.date | None = None) -> StudyOutcome:
    spec = BootstrapSpec()
    pairs = []
    coverages = pair_coverages(plan, verdicts, calls, out_dir / "calls.jsonl", receipts_of(plan, out_dir))
    for guard in plan.guards:
        for model in plan.models:
            outcomes = tuple(
                outcome(t.name, rows_for(plan, model.id, t, verdicts[guard.id], calls),
                        plan.thresholds, transform=t.transform, strength=t.strength,
                        second_judge=len(plan.judges) > 1, stack=guard.output is not None, spec=spec)
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


def receipts_of(plan: StudyPlan, out_dir: Path) -> dict[tuple[str, Layer], Path]:
    """(guard id, layer) -> the receipts its verdicts are in (the first stack's folder that has it)."""
    found: dict[tuple[str, Layer], Path] = {}
    for index, stack in enumerate(plan.guards):
        folder = guard_folder(out_dir, index, stack.id)
        if stack.input is not None:
            found.setdefault((stack.input.id, "input_guard"), folder / "receipts.jsonl")
        if stack.output is not None:
            found.setdefault((stack.output.id, "output_guard"), folder / "output-receipts.jsonl")
    return found


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


def write_cases(plan: StudyPlan, out_dir: Path, verdicts: dict[str, StackVerdicts],
                calls: ResponseOutcome) -> list[Path]:
    """One line per model x transformation x prompt: texts, responses, judge verdicts, guard verdicts
    (for a stack with an output guard, each layer's two verdicts and the layer that stopped T(p))."""
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
                first = calls.judgements.get((0, model.id, prompt.id, t.name))
                guards = {stack.id: _case_guard(stack.output is not None, verdicts[stack.id], model.id, prompt.id, t,
                                                first.status if first else None)
                          for stack in plan.guards}
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


def _case_guard(stacked: bool, verdicts: StackVerdicts, model_id: str, prompt_id: str, t: Transformation,
                judgement: JudgeStatus | None) -> dict[str, Any]:
    """A guard stack's part of a case line: an input guard alone as it always was (its two
    verdicts); a stack with an output guard, each layer's and `stopped_by`."""
    def pair(layer: Layer) -> dict[str, Any]:
        said = {name: dict(_layers(verdicts, model_id, prompt_id, name)).get(layer) for name in (None, t.name)}
        return {"original": said[None], "transformed": said[t.name]}

    if not stacked:
        return pair("input_guard")
    transformed, stopper = through(_layers(verdicts, model_id, prompt_id, t.name))
    return {**({"input": pair("input_guard")} if verdicts.inputs is not None else {}),
            "output": pair("output_guard"), "stopped_by": stopped_by(transformed, stopper, judgement)}


def write_plots(pairings: dict[str, Any], out_dir: Path) -> list[Path]:
    from margin.reports.plots import capability_ladder_figure, pairing_matrix_figure, save

    name = pairings["meta"]["study"]["name"]
    return (save(pairing_matrix_figure(pairings, f"{name}: qualifying / tested transformations"),
                 out_dir / "pairing-matrix")
            + save(capability_ladder_figure(pairings, title=f"{name}: capability ladder"), out_dir / "capability-ladder"))
