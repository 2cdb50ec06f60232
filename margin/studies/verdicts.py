"""Guard verdicts for a study: originals and transformed prompts, through the search engine.

Each prompt is one exhaustive search over its transformed texts (one candidate per
transformation) through the same guard session as `margin run` (`margin.serving.session`):
the driver batches or streams every prompt's texts, answers repeats from the verdict cache,
writes receipts and replays them on resume.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from margin.search.candidates import original_candidate
from margin.search.strategies import ExhaustiveSearch
from margin.serving.calls import CallSettings
from margin.serving.driver import VerdictReplay
from margin.serving.replay import cut_torn_tail, load_replay
from margin.serving.session import GuardSession
from margin.serving.verdict_cache import default_cache_path
from margin.studies.plan import GuardPlan, StudyPlan
from margin.types import Candidate, Verdict

#: (prompt id, transformation name or None for the original) -> verdict, None when missing
Verdicts = dict[tuple[str, str | None], Verdict | None]


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


def guard_verdicts(plan: StudyPlan, guard: GuardPlan, folder: Path, *, settings: CallSettings, resume: bool,
                   cache: bool, on_batch: Callable[[int, int, float], None] = lambda *_: None) -> tuple[Verdicts, GuardStats]:
    built = candidates(plan)
    searches = [ExhaustiveSearch(p, built[p.id][0], built[p.id][1], math.inf) for p in plan.prompts]
    folder.mkdir(parents=True, exist_ok=True)
    receipts_path = folder / "receipts.jsonl"
    replay = VerdictReplay()
    if resume:
        cut_torn_tail(receipts_path)
        replay = load_replay(receipts_path)
    with GuardSession(guard.spec, guard.info, settings, on_batch=on_batch) as session:
        driver = session.search_recorded(searches, receipts_path, replay.run_id or secrets.token_hex(8),
                                         cache_path=default_cache_path() if cache else None, replay=replay,
                                         guard_id=guard.id, write_results=False)
    verdicts: Verdicts = {}
    for search in searches:
        for candidate, verdict in search.verdicts.items():
            name = None if candidate.transform is None else f"{candidate.transform}:{candidate.strength}"
            verdicts[(candidate.prompt_id, name)] = verdict
    stats = GuardStats(sent=driver.sent, cache_hits=driver.stats.cache_hits, replayed=driver.stats.replayed,
                       missing=sum(v is None for v in verdicts.values()))
    return verdicts, stats
