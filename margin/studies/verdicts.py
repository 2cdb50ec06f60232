"""Guard verdicts for a study, through the search engine.

An input guard judges the originals and the transformed prompts: each prompt is one
exhaustive search over its transformed texts (one candidate per transformation). An output
guard judges each protected model's response to each of them, as a response case (the prompt
the model was sent, then its response): one search per case, its response the only candidate.
Both go through the same guard session as `margin run` (`margin.runs.executing.session`): the
driver batches or streams the texts, asks each distinct request once (a case's key is what the
guard sees of it: the whole case, or its text for a guard that reads the text alone), answers
repeats from the verdict cache, writes receipts and replays them on resume.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from margin.runs.executing.driver import Driver, VerdictReplay
from margin.runs.executing.resume import cut_torn_tail, load_replay
from margin.runs.executing.session import CallSettings, GuardSession
from margin.runs.executing.verdict_cache import default_cache_path
from margin.search.candidates import original_candidate
from margin.search.strategies import ExhaustiveSearch
from margin.studies.models import ModelReply
from margin.studies.plan import GuardPlan, StudyPlan
from margin.types import Candidate, Prompt, Turn, Verdict

#: (prompt id, transformation name or None for the original) -> verdict, None when missing
Verdicts = dict[tuple[str, str | None], Verdict | None]
#: (model id, prompt id, transformation name or None) -> the output guard's verdict on that
#: model's response to that text; None when missing (no verdict, or no response to judge)
OutputVerdicts = dict[tuple[str, str, str | None], Verdict | None]
#: a response the output guard judges: (model id, prompt id, transformation name or None)
ResponseKey = tuple[str, str, str | None]


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


OnBatch = Callable[[int, int, float], None]


def guard_verdicts(plan: StudyPlan, guard: GuardPlan, folder: Path, *, settings: CallSettings, resume: bool,
                   cache: bool, on_batch: OnBatch = lambda *_: None) -> tuple[Verdicts, GuardStats]:
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
                reply = responses.get((model.id, prompt.id, name))
                if reply is None:
                    continue
                sent = prompt.text if t is None else plan.transformed(prompt, t)
                cases[(model.id, prompt.id, name)] = Prompt(
                    f"{model.id}/{prompt.id}/{name or 'original'}", reply.text, prompt.label, prompt.type,
                    history=(Turn("user", sent),), target="response")
    return cases


def output_verdicts(plan: StudyPlan, guard: GuardPlan, folder: Path,
                    responses: Mapping[ResponseKey, ModelReply | None], *, settings: CallSettings, resume: bool,
                    cache: bool, on_batch: OnBatch = lambda *_: None) -> tuple[OutputVerdicts, GuardStats]:
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
            resume: bool, cache: bool, on_batch: OnBatch, target: str | None = None) -> Driver:
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
