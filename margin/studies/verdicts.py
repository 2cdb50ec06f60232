"""Guard verdicts for a study, through the search engine.

An input guard judges the originals and the transformed prompts: each prompt is one
exhaustive search over its transformed texts (one candidate per transformation). An output
guard judges each protected model's response to each of them, as a response case (the prompt
the model was sent, then its response): one search per case, its response the only candidate.
Both go through the same guard session as `margin run` (`margin.serving.session`): the
driver batches or streams the texts, asks each distinct request once (a case's key is what the
guard sees of it: the whole case, or its text for a guard that reads the text alone), answers
repeats from the verdict cache, writes receipts and replays them on resume.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from margin.runfolder import read_jsonl
from margin.search.candidates import original_candidate
from margin.search.strategies import ExhaustiveSearch
from margin.serving.calls import CallSettings
from margin.serving.driver import Driver, VerdictReplay
from margin.serving.replay import cut_torn_tail, load_replay
from margin.serving.session import GuardSession
from margin.serving.verdict_cache import default_cache_path
from margin.studies.health import ModelUnavailable
from margin.studies.models import ModelReply
from margin.studies.plan import StudyPlan
from margin.studies.responses import OnBatch, ResponseKey, Responses
from margin.studies.stacks import GuardPlan
from margin.types import Candidate, GuardInfo, Prompt, Turn, Verdict
from margin.util.safefiles import slug

#: (prompt id, transformation name or None for the original) -> verdict, None when missing
Verdicts = dict[tuple[str, str | None], Verdict | None]
#: the output guard's verdict on a model's response (by its key); None when missing (no
#: verdict, or no response to judge)
OutputVerdicts = dict[ResponseKey, Verdict | None]


@dataclass
class GuardStats:
    sent: int = 0
    cache_hits: int = 0
    replayed: int = 0
    missing: int = 0


def candidates(plan: StudyPlan) -> dict[str, tuple[Candidate, list[Candidate]]]:
    """Per prompt: the original and one candidate per transformation (cost in corpus units)."""
    out = {}
    for prompt in plan.prompts:
        transformed = []
        for t in plan.transformations:
            transformed.append(Candidate(prompt.id, t.transform, t.strength, plan.seed,
                                         plan.transformed(prompt, t), plan.cost(prompt, t)))
        out[prompt.id] = (original_candidate(prompt, plan.seed), transformed)
    return out


GuardBatch = Callable[[int, int, float], None]  # (texts, capacity, seconds) per guard call
_V = TypeVar("_V", Verdicts, OutputVerdicts)


def guard_verdicts(plan: StudyPlan, guard: GuardPlan, folder: Path, *, settings: CallSettings, resume: bool,
                   cache: bool, on_batch: GuardBatch = lambda *_: None) -> tuple[Verdicts, GuardStats]:
    """An input guard's verdicts on every original and transformed prompt."""
    built = candidates(plan)
    searches = [ExhaustiveSearch(p, built[p.id][0], built[p.id][1], math.inf) for p in plan.prompts]
    driver = _search(guard, searches, folder / "receipts.jsonl", settings=settings, resume=resume, cache=cache,
                     on_batch=on_batch)
    verdicts: Verdicts = {}
    for search in searches:
        for candidate, verdict in search.verdicts.items():
            name = None if candidate.transform is None else f"{candidate.transform}:{candidate.strength}"
            verdicts[(candidate.prompt_id, name)] = verdict
    return verdicts, _stats(driver, verdicts.values())


def response_cases(plan: StudyPlan, responses: Mapping[ResponseKey, ModelReply | None]) -> dict[ResponseKey, Prompt]:
    """Every response an output guard judges, as a response case: the text the model was sent
    (its user turn), then its response (the target). A missing response has no case. The case
    id names the model, the prompt and the transformation (`original` for the prompt itself)."""
    cases = {}
    for model in plan.models:
        for prompt in plan.prompts:
            for t in (None, *plan.transformations):
                name = None if t is None else t.name
                key = ResponseKey(model.id, prompt.id, name)
                reply = responses.get(key)
                if reply is None:
                    continue
                sent = prompt.text if t is None else plan.transformed(prompt, t)
                cases[key] = Prompt(
                    f"{model.id}/{prompt.id}/{name or 'original'}", reply.text, prompt.label, prompt.type,
                    history=(Turn("user", sent),), target="response")
    return cases


def output_verdicts(plan: StudyPlan, guard: GuardPlan, folder: Path,
                    responses: Mapping[ResponseKey, ModelReply | None], *, settings: CallSettings, resume: bool,
                    cache: bool, on_batch: GuardBatch = lambda *_: None) -> tuple[OutputVerdicts, GuardStats]:
    """An output guard's verdicts on every response the models gave (receipts in
    `output-receipts.jsonl`, each line saying `target: response`)."""
    cases = response_cases(plan, responses)
    searches = [ExhaustiveSearch(case, original_candidate(case, plan.seed), [], math.inf) for case in cases.values()]
    driver = _search(guard, searches, folder / "output-receipts.jsonl", settings=settings, resume=resume, cache=cache,
                     on_batch=on_batch, target="response")
    verdicts: OutputVerdicts = {}
    for key, search in zip(cases, searches, strict=True):
        verdicts[key] = next(iter(search.verdicts.values()), None)
    return verdicts, _stats(driver, verdicts.values())


def _search(guard: GuardPlan, searches: list[ExhaustiveSearch], receipts_path: Path, *, settings: CallSettings,
            resume: bool, cache: bool, on_batch: GuardBatch, target: str | None = None) -> Driver:
    receipts_path.parent.mkdir(parents=True, exist_ok=True)
    replay = VerdictReplay()
    if resume:
        cut_torn_tail(receipts_path)
        replay = load_replay(receipts_path)
    with GuardSession(guard.spec, guard.info, settings, on_batch=on_batch) as session:
        return session.search_recorded(searches, receipts_path, replay.run_id or secrets.token_hex(8),
                                       cache_path=default_cache_path() if cache else None, replay=replay,
                                       guard_id=guard.id, write_results=False,
                                       whole_cases=guard.shapes.whole_cases, target=target)


def _stats(driver: Driver, verdicts: Iterable[Verdict | None]) -> GuardStats:
    return GuardStats(sent=driver.sent, cache_hits=driver.stats.cache_hits, replayed=driver.stats.replayed,
                      missing=sum(v is None for v in verdicts))


@dataclass(frozen=True)
class StackVerdicts:
    """What one stack's guards said: its input guard's verdicts, its output guard's (None for
    a layer it does not have)."""

    inputs: Verdicts | None
    outputs: OutputVerdicts | None


def guard_folder(out_dir: Path, index: int, guard_id: str) -> Path:
    return out_dir / "guards" / f"{index:02d}-{slug(guard_id)}"


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
        for guard, folder in self._todo("input"):
            verdicts, self.stats[guard.id] = guard_verdicts(
                self.plan, guard, folder, settings=self.settings, resume=self.resume, cache=self.cache,
                on_batch=self._reporter(guard.id))
            self.by_input[guard.info] = _answered(guard.id, verdicts, folder / "receipts.jsonl")

    def outputs(self, responses: Responses) -> None:
        for guard, folder in self._todo("output"):
            verdicts, self.stats[f"out:{guard.id}"] = output_verdicts(
                self.plan, guard, folder, responses, settings=self.settings, resume=self.resume, cache=self.cache,
                on_batch=self._reporter(guard.id))
            self.by_output[guard.info] = _answered(guard.id, verdicts, folder / "output-receipts.jsonl")

    def _todo(self, role: Literal["input", "output"]) -> Iterator[tuple[GuardPlan, Path]]:
        """Each guard in `role` not asked yet, with the folder of the first stack that has it."""
        done: Mapping[GuardInfo, object] = self.by_input if role == "input" else self.by_output
        for index, stack in enumerate(self.plan.guards):
            guard = stack.input if role == "input" else stack.output
            if guard is not None and guard.info not in done:  # read after each guard is collected
                self.on_stage(f"{role} guard {guard.id}")
                yield guard, guard_folder(self.out_dir, index, stack.id)

    def verdicts(self) -> dict[str, StackVerdicts]:
        """Per stack id, what its guards said."""
        return {stack.id: StackVerdicts(None if stack.input is None else self.by_input[stack.input.info],
                                        None if stack.output is None else self.by_output[stack.output.info])
                for stack in self.plan.guards}

    def _reporter(self, guard_id: str) -> Callable[[int, int, float], None]:
        return lambda texts, _capacity, compute_s: self.on_batch(guard_id, texts, compute_s)


def _answered(guard_id: str, verdicts: _V, receipts: Path) -> _V:
    """`verdicts`, unless the guard gave none at all: that stops the study (resumable once it
    answers), naming the guard and its first error."""
    given = list(verdicts.values())
    if given and all(v is None for v in given):
        raise ModelUnavailable(f"guard {guard_id} gave no verdict at all; its first error: "
                               f"{guard_error(receipts) or 'no output'}")
    return verdicts


def receipt_lines(path: Path) -> Iterable[Mapping[str, Any]]:
    return read_jsonl(path) if path.is_file() else ()


def guard_error(path: Path) -> str | None:
    """The first error in a guard's receipts for a candidate that never got a verdict."""
    lines = [line for line in receipt_lines(path) if line.get("kind") == "call"]

    def key(line: Mapping[str, Any]) -> tuple[Any, ...]:
        return (line.get("prompt_id"), line.get("transform"), line.get("strength"), line.get("seed"))

    answered = {key(line) for line in lines if line.get("verdict") is not None}
    return next((str(line["error"]) for line in lines if key(line) not in answered and line.get("error")), None)
