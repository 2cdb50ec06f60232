"""`margin judge validate`: a judge measured against people, on labelled completions.

The cases (docs/judges.md):
- a single-answer judge (`refusal-rules`) classifies every labelled completion once;
- the behaviour judge sees two answers: each completion of source k is paired with the
  completion of source k+1 (sources in name order, cyclic) to the same prompt id, as the
  original and the transformed answer of one prompt. Every completion is the original of
  exactly one pair: its `original_behaviour` is scored against its label, `transformed_behaviour`
  against its partner's, and `preserved` against "same mapped label" (same prompt, so the
  request is the same).

An LLM judge's requests go through a study's call engine (`StudyCalls` on the request book,
the model's pool, the response cache, `calls.jsonl` receipts replayed on `--resume`), so
retries, outages and a kill -9 behave as in a study. Scoring is a pure function of the
labels and the judge outputs: a resumed validation writes the same record.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from margin.datasets.completions import (
    COMPLY,
    LABEL_MAP,
    MAPPING_TEXT,
    LabelledCase,
    LabelsFile,
    comply,
)
from margin.engine.loop import run_pools
from margin.errors import EndpointUnreachable, InputError
from margin.judges import agreement as ag
from margin.judges.llm import LLMJudge
from margin.judges.rules import NAME as RULES
from margin.judges.rules import RuleJudge
from margin.judges.verdicts import JudgeCase, JudgeVerdict
from margin.runfolder import dumps, read_jsonl
from margin.serving.calls import CallSettings
from margin.studies.cache import ReplyCache, default_cache_path
from margin.studies.calls import StudyCalls
from margin.studies.config import JudgeConfig, Source, _marks, pydantic_error
from margin.studies.model_pools import model_limits, model_pool
from margin.studies.models import ModelReply
from margin.studies.plan import JudgePlan, _judge
from margin.studies.responses import _open_receipts
from margin.studies.validation_record import (
    Estimate,
    ValidationManifest,
    ValidationRecord,
)
from margin.util.folderlock import entries, hold
from margin.util.hashing import canonical_json, sha256_bytes, sha256_text
from margin.util.safefiles import atomic_write_text
from margin.util.yamlfile import parse_yaml

INVALID = "invalid"  # a judge output that does not parse: its own column, never a class
MISSING = "missing"  # no output after every retry: counted, left out of n


def load_judge(spec: str) -> RuleJudge | JudgePlan:
    """`refusal-rules`, or a YAML file (or inline YAML mapping) holding what a study's `judge:` takes."""
    if spec == RULES:
        return RuleJudge()
    path = Path(spec)
    if path.is_file():
        data = path.read_bytes()
    elif spec.lstrip().startswith("{"):
        data, path = spec.encode(), Path("--judge")
    else:
        raise InputError(f"expected {RULES}, a judge YAML file or an inline mapping", field="--judge")
    source = Source(path, sha256=sha256_bytes(data))
    raw, node = parse_yaml(data, path)
    if node is not None:
        _marks(node, (), source.lines, path)
    if not isinstance(raw, dict):
        raise InputError("a judge is a mapping (template, model, max_tokens, id) as a study's `judge:`",
                         path=path, line=1)
    try:
        config = JudgeConfig.model_validate(raw)
    except ValidationError as exc:
        raise pydantic_error(exc, source) from None
    plan = _judge(config, None, source, ())  # type: ignore[arg-type]
    return plan.judge if isinstance(plan.judge, RuleJudge) else plan


@dataclass(frozen=True, slots=True)
class Pair:
    original: LabelledCase
    transformed: LabelledCase

    def judge_case(self) -> JudgeCase:
        return JudgeCase(self.original.prompt, self.original.completion, self.transformed.prompt,
                         self.transformed.completion)


def ordered(files: Sequence[LabelsFile]) -> list[LabelledCase]:
    cases = [c for f in files for c in f.cases]
    return sorted(cases, key=lambda c: (c.source, _id_key(c.id)))


def _id_key(case_id: str) -> tuple[int, str]:
    tail = case_id.rsplit("-", 1)[-1]
    return (int(tail), case_id) if tail.isdigit() else (1 << 62, case_id)


def pairs(cases: Sequence[LabelledCase]) -> list[Pair]:
    """Each completion with the next source's completion to the same prompt id (cyclic)."""
    sources = sorted({c.source for c in cases})
    if len(sources) < 2:
        raise InputError("the behaviour judge reads two answers to one prompt: give labels of two source "
                         "models or more (two files, or a `source` column)", field="--labels")
    by = {(c.source, c.id): c for c in cases}
    out = []
    for case in cases:
        partner = sources[(sources.index(case.source) + 1) % len(sources)]
        other = by.get((partner, case.id))
        if other is None:
            raise InputError(f"prompt {case.id!r} has no labelled completion from source {partner!r} to pair with",
                             path=case.file, line=case.line, field="id")
        if other.prompt != case.prompt:
            raise InputError(f"prompt {case.id!r} differs between sources {case.source!r} and {partner!r}",
                             path=case.file, line=case.line, field="prompt")
        out.append(Pair(case, other))
    return out


# ---- running the judge ----------------------------------------------------------------------

def check_out(out_dir: Path, current: ValidationManifest, resume: bool) -> None:
    saved_path = out_dir / "validate.json"
    if not resume:
        if out_dir.exists() and (not out_dir.is_dir() or entries(out_dir)):
            raise InputError("output folder exists and is not empty; choose another --out (or add --resume)",
                             path=out_dir, field="--out")
        return
    saved = next(iter(read_jsonl(saved_path)), None) if saved_path.is_file() else None
    if not isinstance(saved, dict):
        raise InputError("not a validation folder (no validate.json) to resume", path=out_dir, field="--resume")
    if canonical_json(saved) != canonical_json(current.model_dump()):
        raise InputError("cannot resume: the judge or the labels changed since it began", path=saved_path)


def judge_pairs(plan: JudgePlan, todo: Sequence[Pair], out_dir: Path, *, settings: CallSettings, resume: bool,
                cache: bool, on_batch: Callable[[int], None] = lambda _: None) -> list[JudgeVerdict | None]:
    """Every pair through the study call engine; None where no output came after every retry."""
    receipts, replay = _open_receipts(out_dir / "calls.jsonl", resume)
    store = ReplyCache(default_cache_path()) if cache else None
    model = plan.model
    assert model is not None and isinstance(plan.judge, LLMJudge)
    pool = model_pool(model.id, model.spec, model.max_tokens, settings,
                      on_call=lambda requests, _capacity, _s: on_batch(requests))
    calls = StudyCalls(max_attempts={model.id: model_limits(model.spec, settings).max_attempts},
                       retry_wait_s=settings.retry_wait_s, store=store, replay=replay, on_record=receipts.write)
    calls.health.names = {model.id: f"judge {plan.id} (model {model.spec.model})"}
    verdicts: list[JudgeVerdict | None] = [None] * len(todo)

    for index, pair in enumerate(todo):
        def done(reply: ModelReply | None, i: int = index) -> None:
            verdicts[i] = None if reply is None else plan.judge.parse(reply.text)

        tag = {"role": "validation", "judge": plan.id, "source": pair.original.source,
               "partner": pair.transformed.source, "prompt_id": pair.original.id}
        calls.request(model.id, model.key, plan.judge.messages(pair.judge_case()), tag, done)
    calls.seal(model.id)
    try:
        run_pools(calls.book, [pool])
    finally:
        receipts.close()
        if store is not None:
            store.close()
    return verdicts


@dataclass
class Validation:
    record: dict[str, Any]  # validation.json's object (ValidationRecord, as written)
    report: str
    out_dir: Path | None


def validate(judge: RuleJudge | JudgePlan, files: Sequence[LabelsFile], out_dir: Path | None, *,
             settings: CallSettings | None = None, resume: bool = False, cache: bool = True,
             on_batch: Callable[[int], None] = lambda _: None) -> Validation:
    current = ValidationManifest.of(judge, files)
    if out_dir is None and not isinstance(judge, RuleJudge):
        raise InputError("an LLM judge's validation keeps its receipts: give --out", field="--out")
    if out_dir is None:
        return _validate(judge, files, None, current, settings=settings, resume=resume, cache=cache,
                         on_batch=on_batch)
    if not out_dir.is_dir():  # a --resume of no folder fails here, and no folder is made for it
        check_out(out_dir, current, resume)
    with hold(out_dir, what="validation folder"):  # one writer at a time (margin.util.folderlock)
        check_out(out_dir, current, resume)
        return _validate(judge, files, out_dir, current, settings=settings, resume=resume, cache=cache,
                         on_batch=on_batch)


def _validate(judge: RuleJudge | JudgePlan, files: Sequence[LabelsFile], out_dir: Path | None,
              current: ValidationManifest, *, settings: CallSettings | None, resume: bool, cache: bool,
              on_batch: Callable[[int], None]) -> Validation:
    if out_dir is not None and not resume:
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out_dir / "validate.json", dumps(current.model_dump()) + "\n")
    cases = ordered(files)
    judged: list[tuple[LabelledCase, str, Any]]
    if isinstance(judge, RuleJudge):
        judged = [(c, judge.classify(c.completion), None) for c in cases]
        preserved = None
    else:
        todo = pairs(cases)
        try:
            verdicts = judge_pairs(judge, todo, out_dir, settings=settings or CallSettings(),  # type: ignore[arg-type]
                                   resume=resume, cache=cache, on_batch=on_batch)
        except EndpointUnreachable:
            if not resume:  # an endpoint that was never there: leave no half-made folder
                shutil.rmtree(out_dir, ignore_errors=True)  # type: ignore[arg-type]
            raise
        judged = [(p.original, _behaviour(v, "original"), (p, v)) for p, v in zip(todo, verdicts, strict=True)]
        preserved = [(p, v) for p, v in zip(todo, verdicts, strict=True)]
    record = score(current, judged, preserved)
    written = record.model_dump(exclude_unset=True)
    report = render(record)
    if out_dir is not None:
        atomic_write_text(out_dir / "validation.json", dumps(written) + "\n")
        atomic_write_text(out_dir / "report.md", report)
    return Validation(written, report, out_dir)


def _behaviour(verdict: JudgeVerdict | None, side: str) -> str:
    if verdict is None:
        return MISSING
    value = verdict.original_behaviour if side == "original" else verdict.transformed_behaviour
    return value if verdict.status != "unparseable" and value is not None else INVALID


# ---- scoring (pure) -------------------------------------------------------------------------

def _binary(label: str) -> str:
    """A behaviour class as comply vs not comply; an invalid output stays invalid: read as `not
    comply`, a judge that answered nothing readable agreed with every refusal."""
    return label if label == INVALID else comply(label)


def _figures(truth: Sequence[str], judged: Sequence[str]) -> dict[str, Any]:
    classes = ag.agreement(truth, judged)
    binary = ag.agreement([comply(t) for t in truth], [_binary(j) for j in judged])
    return {"n": len(truth), "accuracy": classes["accuracy"].as_dict(), "kappa": classes["kappa"].as_dict(),
            "accuracy_comply": binary["accuracy"].as_dict(), "kappa_comply": binary["kappa"].as_dict(),
            "invalid": sum(j == INVALID for j in judged)}


def _ceiling(cases: list[LabelledCase]) -> dict[str, Any]:
    one: list[str] = [LABEL_MAP[c.annotation_1] for c in cases]
    two: list[str] = [LABEL_MAP[c.annotation_2] for c in cases]
    figures = _figures(one, two)
    figures.pop("invalid")
    return figures


def score(manifest: ValidationManifest, judged: list[tuple[LabelledCase, str, Any]],
          preserved: list[tuple[Pair, JudgeVerdict | None]] | None) -> ValidationRecord:
    scored = [(c, j) for c, j, _ in judged if j != MISSING]
    cases = [c for c, _ in scored]
    truth: list[str] = [c.truth for c in cases]
    labels = [j for _, j in scored]
    overall = _figures(truth, labels)
    ceiling = _ceiling(cases)
    record: dict[str, Any] = {
        **manifest.model_dump(),
        "cases": ("single completions" if preserved is None else
                  "pairs: each completion (original) with the next source's completion to the same prompt"),
        "mapping": MAPPING_TEXT,
        "interval_method": ag.METHOD,
        "n": overall["n"],
        "missing": len(judged) - len(scored),
        "invalid": overall["invalid"],
        "kappa": overall["kappa"], "accuracy": overall["accuracy"],
        "kappa_comply": overall["kappa_comply"], "accuracy_comply": overall["accuracy_comply"],
        "ceiling_kappa": ceiling["kappa"], "ceiling_accuracy": ceiling["accuracy"],
        "ceiling_kappa_comply": ceiling["kappa_comply"], "ceiling_accuracy_comply": ceiling["accuracy_comply"],
        "confusion": ag.confusion(truth, labels),
        "confusion_comply": ag.confusion([comply(t) for t in truth], [_binary(j) for j in labels]),
        "slices": {"source": _slices(scored, lambda c: c.source), "type": _slices(scored, lambda c: c.type)},
    }
    if preserved is not None:
        record["pairs"] = _pair_figures(preserved)
    record["receipt_sha256"] = sha256_text(canonical_json(
        [[c.source, c.id, j] for c, j, _ in judged]))
    return ValidationRecord.model_validate(record)


def _slices(scored: list[tuple[LabelledCase, str]], key: Callable[[LabelledCase], str]) -> dict[str, Any]:
    out = {}
    for name in sorted({key(c) for c, _ in scored}):
        part = [(c, j) for c, j in scored if key(c) == name]
        figures = _figures([c.truth for c, _ in part], [j for _, j in part])
        ceiling = _ceiling([c for c, _ in part])
        out[name] = {**figures, "ceiling_kappa_comply": ceiling["kappa_comply"]}
    return out


def _pair_figures(preserved: list[tuple[Pair, JudgeVerdict | None]]) -> dict[str, Any]:
    """The two-answer judge's other readings: the transformed side and `preserved`."""
    done = [(p, v) for p, v in preserved if v is not None]
    after_truth: list[str] = [p.transformed.truth for p, _ in done]
    after = [_behaviour(v, "transformed") for _, v in done]
    kept_truth = ["preserved" if p.original.truth == p.transformed.truth else "changed" for p, _ in done]
    kept = [INVALID if v.status == "unparseable" else v.status for _, v in done]
    return {"n": len(done), "transformed_behaviour": _figures(after_truth, after),
            "preserved": {**{k: v.as_dict() for k, v in ag.agreement(kept_truth, kept).items()},
                          "confusion": ag.confusion(kept_truth, kept)}}


# ---- the report -----------------------------------------------------------------------------

def _fmt(figure: Estimate) -> str:
    if figure.estimate is None:
        return "undefined"
    if figure.low is None or figure.high is None:
        return f"{figure.estimate:.3f}"
    return f"{figure.estimate:.3f} [{figure.low:.3f}, {figure.high:.3f}]"


def render(record: ValidationRecord) -> str:
    judge = record.judge["id"]
    files = ", ".join(f"{x.file} ({x.cases} cases, sha256 {x.sha256[:12]})" for x in record.labels)
    lines = [f"# Judge validation: {judge}", "", f"Labels: {files}.",
             f"Cases: {record.cases}. n = {record.n} scored; {record.missing} without output after every "
             f"retry (left out of n); {record.invalid} invalid or unparseable outputs (kept in n as their own "
             "column: they count as disagreement).",
             f"Label mapping: {record.mapping}.",
             f"Intervals (95%): {record.interval_method}.", "",
             "| figure | judge vs final label | annotator 1 vs annotator 2 (ceiling) |", "| --- | --- | --- |"]
    for name in ("kappa_comply", "accuracy_comply", "kappa", "accuracy"):
        label = {"kappa_comply": "Cohen's kappa, comply vs not comply", "accuracy_comply": "accuracy, comply vs not",
                 "kappa": "Cohen's kappa, behaviour classes", "accuracy": "accuracy, behaviour classes"}[name]
        lines.append(f"| {label} | {_fmt(getattr(record, name))} | {_fmt(getattr(record, 'ceiling_' + name))} |")
    lines += ["", "Confusion matrix (rows: final label mapped; columns: the judge):", ""]
    columns = sorted({j for row in record.confusion.values() for j in row})
    lines += ["| truth \\ judge | " + " | ".join(columns) + " |", "| --- |" + " --- |" * len(columns)]
    for truth, row in record.confusion.items():
        lines.append(f"| {truth} | " + " | ".join(str(row.get(c, 0)) for c in columns) + " |")
    for kind in ("source", "type"):
        lines += ["", f"By {kind}:", "", f"| {kind} | n | kappa comply | accuracy comply | invalid | ceiling kappa comply |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for name, s in record.slices[kind].items():
            lines.append(f"| {name} | {s.n} | {_fmt(s.kappa_comply)} | {_fmt(s.accuracy_comply)} | "
                         f"{s.invalid} | {_fmt(s.ceiling_kappa_comply)} |")
    if record.pairs is not None:
        p = record.pairs
        lines += ["", f"Two-answer readings over {p.n} pairs: transformed_behaviour kappa comply "
                      f"{_fmt(p.transformed_behaviour.kappa_comply)}; preserved (truth: the two labels map to the "
                      f"same class) accuracy {_fmt(p.preserved.accuracy)}, kappa {_fmt(p.preserved.kappa)}."]
    return "\n".join(lines) + "\n"


__all__ = ["COMPLY", "load_judge", "validate"]
