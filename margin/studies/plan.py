"""A study plan: the config resolved into what runs, checked against the files it names.

`plan_study(path)` reads the config and checks everything (guards, transformations, dataset,
prompt subset, templates, API key variables) without writing anything or loading a model.
The plan's `manifest` is everything that decides the study's results: a resumed study must
have the same one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.cost import CostModel
from margin.datasets import Dataset, load_dataset
from margin.errors import InputError
from margin.guards.make import describe_guard, guard_shapes, parse_guard
from margin.guards.served_spec import served_spec
from margin.guards.spec import GuardSpec, as_field
from margin.judges.llm import LLMJudge
from margin.judges.rules import RuleJudge
from margin.judges.template import builtin_templates, load_template
from margin.reports.pairings import PROTOCOL, ModelEntity, Thresholds
from margin.runrecord import LimitSample, Named
from margin.runs.preparing.subset import limit_prompts, limit_record
from margin.studies.config import (
    JudgeConfig,
    Loc,
    Source,
    StudyConfig,
    check_env,
    dotted,
    read_config,
)
from margin.studies.models import ModelSpec, identity_key, model_identity
from margin.studies.record import StudyRecord, TransformationEntry
from margin.studies.stacks import GuardPlan, StackPlan
from margin.transforms.registry import get_transform, registry
from margin.transforms.suites import EACH_WORD, builtin_suites, load_suite
from margin.types import Prompt
from margin.util.hashing import canonical_json
from margin.util.suggest import did_you_mean


@dataclass(frozen=True, slots=True)
class Transformation:
    """One transform at one fixed strength, applied to every prompt of the study."""

    transform: str
    strength: str

    @property
    def name(self) -> str:
        return f"{self.transform}:{self.strength}"

    def apply(self, text: str, seed: int) -> str:
        return get_transform(self.transform).apply(text, self.strength, seed)


@dataclass(frozen=True)
class ModelPlan:
    """A chat model the study calls: a protected model or a judge's model."""

    id: str
    spec: ModelSpec
    max_tokens: int
    identity: dict[str, Any]
    metadata: ModelEntity  # as the pairings' meta.models list it

    @property
    def key(self) -> str:
        return identity_key(self.identity)


@dataclass(frozen=True)
class JudgePlan:
    """An LLM judge and the model that answers it; a rule judge has no model (`model` None)."""

    judge: LLMJudge | RuleJudge
    model: ModelPlan | None
    validation: dict[str, Any] | None = None  # its figures against people (validation_summary)
    min_kappa: float | None = None

    @property
    def id(self) -> str:
        return self.judge.id


@dataclass
class StudyPlan:
    config: StudyConfig
    source: Source
    dataset: Dataset
    prompts: tuple[Prompt, ...]
    transformations: tuple[Transformation, ...]
    guards: tuple[StackPlan, ...]  # the `guards:` entries, each a stack of one or two guards
    models: tuple[ModelPlan, ...]
    judges: tuple[JudgePlan, ...]  # the judge, then the second judge if any
    thresholds: Thresholds
    cost_model: CostModel
    limit_sample: LimitSample | None = None  # `prompts.limit`'s sample (None: every selected prompt)
    _texts: dict[tuple[str, str], tuple[str, float]] = field(default_factory=dict, repr=False)

    @property
    def seed(self) -> int:
        return self.config.seed

    def _transform(self, prompt: Prompt, t: Transformation) -> tuple[str, float]:
        key = (prompt.id, t.name)
        if key not in self._texts:  # transforms are pure: build each text and its cost once
            text = t.apply(prompt.text, self.seed)
            self._texts[key] = (text, self.cost_model.cost(prompt.text, text))
        return self._texts[key]

    def transformed(self, prompt: Prompt, t: Transformation) -> str:
        return self._transform(prompt, t)[0]

    def cost(self, prompt: Prompt, t: Transformation) -> float:
        """T(p)'s cost in margin's corpus units (Levenshtein x 100 / mean prompt length)."""
        return self._transform(prompt, t)[1]

    def record(self) -> StudyRecord:
        """What decides this study, as study.json keeps it."""
        return StudyRecord(
            protocol=PROTOCOL,
            name=self.config.name,
            dataset=Named(self.dataset.name, self.dataset.source, self.dataset.sha256),
            prompts=tuple(p.id for p in self.prompts),
            transformations=tuple(TransformationEntry(t.name, t.transform, t.strength) for t in self.transformations),
            seed=self.seed,
            guards=tuple(g.record().document() for g in self.guards),
            models=tuple({**m.metadata.document(), "identity": m.identity} for m in self.models),
            judges=tuple(j.judge.identity() for j in self.judges),
            thresholds=self.thresholds.model_dump(),
            limit_sample=self.limit_sample,
        )


def plan_study(path: Path, on_guard: Callable[[GuardSpec], None] | None = None, *,
            servers: bool = True) -> StudyPlan:
    """The checked plan of the study config at `path`; `on_guard` sees each distinct guard's spec
    once, before anything of it is imported or loaded (the CLI says which code a `python:` guard
    runs).
    A guard behind a server is asked what it serves (part of its identity); `servers=False`
    checks a config whose servers are not up, as far as that goes without them."""
    config, source = read_config(path)
    dataset = _dataset(config, source)
    prompts, limit_sample = _subset(config, source, dataset)
    known: dict[str, GuardPlan] = {}  # a guard two stacks share is told, asked and described once
    guards = tuple(_guard(config, source, i, on_guard, servers, known) for i in range(len(config.guards)))
    _unique([g.id for g in guards], source, "guards", "guard id")
    models = tuple(_protected(config, source, i) for i in range(len(config.models)))
    _unique([m.id for m in models], source, "models", "model id")
    judges = [_judge(config.judge, config, source, ("judge",))]
    if config.second_judge is not None:
        second = _judge(config.second_judge, config, source, ("second_judge",))
        if second.id == judges[0].id:
            raise source.error("the second judge has the same id as the judge: give it its own `id`, "
                               "template or model", ("second_judge",))
        judges.append(second)
    t = config.thresholds
    return StudyPlan(
        config=config, source=source, dataset=dataset, prompts=prompts,
        transformations=_transformations(config, source), guards=guards, models=models, judges=tuple(judges),
        thresholds=Thresholds(evasion=t.evasion, regression=t.regression, preservation=t.preservation),
        cost_model=CostModel.for_corpus(dataset.texts, "corpus"), limit_sample=limit_sample,
    )


def _unique(ids: list[str], source: Source, key: str, what: str) -> None:
    for index, value in enumerate(ids):
        if value in ids[:index]:
            raise source.error(f"{what} {value!r} appears twice (give one of them its own `id`)", (key, index))


def _relative(source: Source, value: str) -> Path:
    path = Path(value)
    return path if path.is_absolute() else source.folder / path


def _dataset(config: StudyConfig, source: Source) -> Dataset:
    if config.dataset in ("sample", "xstest"):
        return load_dataset(config.dataset)
    path = _relative(source, config.dataset)
    if not path.is_file():
        raise source.error(f"no such dataset file: {path} (expected sample, xstest or a path)", ("dataset",))
    return load_dataset(str(path))


def _subset(config: StudyConfig, source: Source, dataset: Dataset) -> tuple[tuple[Prompt, ...], LimitSample | None]:
    """The prompts `prompts` selects, and the record of `limit`'s sample: after the filters, a
    seeded stratified sample, as `margin run --limit` draws it (`margin.runs.preparing.subset`)."""
    subset = config.prompts
    prompts = list(dataset.prompts)
    if subset.ids is not None:
        by_id = {p.id: p for p in prompts}
        for index, pid in enumerate(subset.ids):
            if pid not in by_id:
                raise source.error(f"no prompt {pid!r} in {dataset.name}{did_you_mean(pid, by_id)}",
                                   ("prompts", "ids", index))
            if pid in subset.ids[:index]:
                raise source.error(f"prompt {pid!r} is listed twice", ("prompts", "ids", index))
        prompts = [by_id[pid] for pid in subset.ids]
    if subset.labels is not None:
        prompts = [p for p in prompts if p.label in subset.labels]
    if subset.types is not None:
        known = {p.type for p in dataset.prompts}
        for index, kind in enumerate(subset.types):
            if kind not in known:
                raise source.error(f"no prompt of type {kind!r} in {dataset.name}{did_you_mean(kind, known)}",
                                   ("prompts", "types", index))
        prompts = [p for p in prompts if p.type in subset.types]
    if not prompts:
        raise source.error("the prompt subset is empty", ("prompts",))
    limited = limit_prompts(prompts, subset.limit, config.seed)
    return limited, limit_record(limited, subset.limit, "stratified") if len(limited) < len(prompts) else None


def _transformations(config: StudyConfig, source: Source) -> tuple[Transformation, ...]:
    found: dict[str, Transformation] = {}
    for index, item in enumerate(config.transformations):
        loc: Loc = ("transformations", index)
        if item.suite is not None:
            if item.suite in builtin_suites():
                suite = load_suite(item.suite)
            else:
                path = _relative(source, item.suite)
                if not path.is_file():
                    raise source.error(f"no such suite (built-in: {', '.join(builtin_suites())})"
                                       f"{did_you_mean(item.suite, builtin_suites())}", (*loc, "suite"))
                suite = load_suite(str(path))
            for entry in suite.entries:
                for strength in entry.strengths:
                    if strength != EACH_WORD:  # one edit per word is a family of edits, not one T
                        t = Transformation(entry.transform, strength)
                        found.setdefault(t.name, t)
            continue
        assert item.transform is not None and item.strength is not None
        if item.transform not in registry():
            raise source.error(f"unknown transform {item.transform!r}{did_you_mean(item.transform, registry())}",
                               (*loc, "transform"))
        if item.strength == EACH_WORD:
            raise source.error("@* is one candidate per word, not one fixed strength; name one (@0, 1, 25%, "
                               "salient:2, ...)", (*loc, "strength"))
        try:
            get_transform(item.transform).check_strength(item.strength)
        except ValueError as exc:
            raise source.error(str(exc), (*loc, "strength")) from None
        t = Transformation(item.transform, item.strength)
        found.setdefault(t.name, t)
    return tuple(found.values())


def _guard(config: StudyConfig, source: Source, index: int,
           on_guard: Callable[[GuardSpec], None] | None, servers: bool, known: dict[str, GuardPlan]) -> StackPlan:
    """The `guards[index]` stack: its input guard (`guard:` and the guard-file keys beside it)
    and its output guard (`output_guard:`), each checked as `margin run --guard` checks one."""
    entry = config.guards[index]
    loc: Loc = ("guards", index)
    first = None
    if entry.guard is not None:
        first = _one_guard(entry.guard, dict(entry.model_extra or {}), source, loc, on_guard, servers, known)
    second = None
    if entry.output_guard is not None:
        out = entry.output_guard
        second = _one_guard(out.guard, dict(out.model_extra or {}), source, (*loc, "output_guard"), on_guard,
                            servers, known)
        if "response" not in second.shapes.targets:
            raise source.error(f"guard {second.id} judges {' and '.join(second.shapes.targets)} targets only, so it "
                               "cannot judge a model's response: pick an output guard that takes responses (margin "
                               "guards list shows each guard's shapes)", (*loc, "output_guard"))
    return StackPlan(first, second, entry.name, entry.creator)


def _one_guard(name: str, fields: dict[str, Any], source: Source, loc: Loc,
               on_guard: Callable[[GuardSpec], None] | None, servers: bool, known: dict[str, GuardPlan]) -> GuardPlan:
    try:
        spec = parse_guard(name, fields, source.folder)
    except InputError as exc:
        if exc.path is not None:
            raise  # an error inside a guard file names that file's line
        message, key = as_field(exc)
        where = (*loc, *key.split("."))
        raise source.error(message, where if where in source.lines else loc) from None
    check_env(spec.api_key_env, source, (*loc, "api_key_env"))
    key = spec.model_dump_json()
    if key in known:
        return known[key]
    if on_guard is not None:
        on_guard(spec)
    if servers:
        try:
            spec = served_spec(spec)
        except InputError as exc:
            raise source.error(exc.message, loc) from None
    known[key] = GuardPlan(spec, describe_guard(spec), guard_shapes(spec))
    return known[key]


def _protected(config: StudyConfig, source: Source, index: int) -> ModelPlan:
    model = config.models[index]
    check_env(model.api_key_env, source, ("models", index, "api_key_env"))
    max_tokens = model.max_tokens or config.generation.max_tokens
    spec = ModelSpec(**{k: getattr(model, k) for k in ModelSpec.model_fields})
    metadata = ModelEntity.model_validate({
        "id": model.id, "name": model.name, "creator": model.creator, "parameters_b": model.parameters_b,
        "capability_index": model.capability_index, "capability_source": model.capability_source,
        "backend": spec.backend, "model": spec.checkpoint()[0], "revision": spec.checkpoint()[1]})
    return ModelPlan(model.id, spec, max_tokens, model_identity(spec, max_tokens), metadata)


def _judge(judge: JudgeConfig, config: StudyConfig, source: Source, loc: Loc) -> JudgePlan:
    plan = _judge_only(judge, config, source, loc)
    validation = None
    if judge.validation is not None:
        path = _relative(source, judge.validation)
        validation = validation_summary(path, plan.judge.identity(), f"{dotted((*loc, 'validation'))} in "
                                        f"{source.path}")
    return dataclasses.replace(plan, validation=validation, min_kappa=judge.min_kappa)


VALIDATION_FIELDS = ("n", "kappa_comply", "ceiling_kappa_comply")


def validation_summary(path: Path, identity: dict[str, Any], named_by: str) -> dict[str, Any]:
    """What a study's snapshot carries of its judge's validation record (docs/judges.md): the
    record must be for this very judge (same identity), else its figures say nothing about it."""
    if not path.is_file():
        raise InputError(f"no such judge validation record (named by {named_by})", path=path)
    data = path.read_bytes()
    try:
        record = json.loads(data)
    except ValueError as exc:
        raise InputError(f"not JSON: {exc}", path=path) from None
    if not isinstance(record, dict):
        raise InputError("a validation record is a JSON object (margin judge validate --out)", path=path)
    for key in ("judge", "labels", *VALIDATION_FIELDS):
        if key not in record:
            raise InputError("missing: not a validation record written by margin judge validate", path=path,
                             field=key)
    if record["judge"] != identity:
        raise InputError(f"the record validates judge {record['judge'].get('id')!r} "
                         f"({canonical_json(record['judge'])}), not this study's judge {identity.get('id')!r} "
                         f"({canonical_json(identity)}), named by {named_by}", path=path, field="judge")
    return {"record": path.name, "record_sha256": hashlib.sha256(data).hexdigest(),
            "labels": [{"file": x["file"], "sha256": x["sha256"]} for x in record["labels"]],
            **{key: record[key] for key in VALIDATION_FIELDS}}


def _judge_only(judge: JudgeConfig, config: StudyConfig, source: Source, loc: Loc) -> JudgePlan:
    if judge.model is None:  # `rules: refusal-rules`
        return JudgePlan(RuleJudge(judge_id=judge.id), None)
    if judge.template not in builtin_templates() and not _relative(source, judge.template).is_file():
        raise source.error(f"no such judge template (built-in: {', '.join(builtin_templates())})"
                           f"{did_you_mean(judge.template, builtin_templates())}", (*loc, "template"))
    template = load_template(judge.template, base=source.folder)
    check_env(judge.model.api_key_env, source, (*loc, "model", "api_key_env"))
    max_tokens = judge.model.max_tokens or judge.max_tokens
    identity = model_identity(judge.model, max_tokens)
    llm = LLMJudge(template, identity, judge_id=judge.id)
    plan = ModelPlan(f"judge:{llm.id}", judge.model, max_tokens, identity, ModelEntity(id=llm.id))
    return JudgePlan(llm, plan)
