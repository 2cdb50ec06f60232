"""Guard verdicts for a study: originals and transformed prompts, through the search engine.

Each prompt is one exhaustive search over its transformed texts (one candidate per
transformation), so the engine's driver batches every prompt's texts into full guard calls,
answers repeats from the verdict cache, writes receipts and replays them on resume, on Ray
guard actors or in this process, exactly as `margin run` does.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from margin.guards.make import build_guard
from margin.records import ReceiptWriter
from margin.search.cache import VerdictCache, default_cache_path
from margin.search.candidates import original_candidate
from margin.search.driver import Driver, Replay
from margin.search.resume import cut_torn_tail, load_replay
from margin.search.source import InProcessSource
from margin.search.strategies import ExhaustiveSearch
from margin.studies.plan import GuardPlan, StudyPlan
from margin.types import Candidate, Verdict

Engine = Literal["ray", "local"]
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


def guard_verdicts(plan: StudyPlan, guard: GuardPlan, folder: Path, *, engine: Engine, resume: bool,
                   cache: bool, on_batch: Callable[[int, int, float], None] = lambda *_: None) -> tuple[Verdicts, GuardStats]:
    runtime = plan.config.runtime
    built = candidates(plan)
    searches = [ExhaustiveSearch(p, built[p.id][0], built[p.id][1], math.inf) for p in plan.prompts]
    folder.mkdir(parents=True, exist_ok=True)
    receipts_path = folder / "receipts.jsonl"
    replay = Replay()
    if resume:
        cut_torn_tail(receipts_path)
        replay = load_replay(receipts_path)
    store = VerdictCache(default_cache_path(), guard.info) if cache else None
    writer = ReceiptWriter(receipts_path, replay.run_id or secrets.token_hex(8), guard.id)
    driver = Driver(searches, max_attempts=runtime.max_attempts, retry_wait_s=runtime.retry_wait_s,
                    cache=store, replay=replay, on_call=writer.call)
    try:
        if engine == "ray":
            _on_ray(guard, plan, driver, on_batch)
        else:
            _in_process(guard, plan, driver, on_batch)
    finally:
        writer.close()
        if store is not None:
            store.close()
    verdicts: Verdicts = {}
    for search in searches:
        for candidate, verdict in search.verdicts.items():
            name = None if candidate.transform is None else f"{candidate.transform}:{candidate.strength}"
            verdicts[(candidate.prompt_id, name)] = verdict
    stats = GuardStats(sent=driver.stats.sent, cache_hits=driver.stats.cache_hits, replayed=driver.stats.replayed,
                       missing=sum(v is None for v in verdicts.values()))
    return verdicts, stats


def _on_ray(guard: GuardPlan, plan: StudyPlan, driver: Driver, on_batch: Callable[[int, int, float], None]) -> None:
    from margin.search.runtime import RaySource

    runtime, spec = plan.config.runtime, guard.spec
    source = RaySource(spec, replicas=spec.replicas, num_cpus=spec.num_cpus, num_gpus=spec.num_gpus,
                       max_batch_size=spec.max_batch_size or runtime.batch_size, max_attempts=runtime.max_attempts,
                       retry_wait_s=runtime.retry_wait_s, call_timeout_s=runtime.call_timeout_s)
    try:
        info = source.start()
        if info != guard.info:
            raise RuntimeError(f"the guard built on the cluster is not the guard described here (is the same "
                               f"margin installed on every node?): {info} != {guard.info}")
        source.run(driver, runtime.batch_size, on_batch)
    finally:
        source.close()


def _in_process(guard: GuardPlan, plan: StudyPlan, driver: Driver, on_batch: Callable[[int, int, float], None]) -> None:
    runtime = plan.config.runtime
    built = build_guard(guard.spec)
    try:
        source = InProcessSource(built, max_attempts=runtime.max_attempts, retry_wait_s=runtime.retry_wait_s)
        source.run(driver, min(runtime.batch_size, built.max_batch_size), on_batch)
    finally:
        built.close()
