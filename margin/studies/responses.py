"""Protected-model responses to every original and transformed prompt, and the judges' verdicts.

One `Calls` book for every model and judge, so all of them run at once on the executor: a
model's response to p and to T(p) are asked for up front (each distinct text once per model);
as soon as both are in, every judge is asked whether T(p) kept the behaviour of p. Judge
outputs are kept raw and parsed strictly afterwards (parsing is pure, so a resumed study
parses the same way). Every attempt goes to one receipts file, `calls.jsonl`.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from margin.backends.secrets import public_url
from margin.engine.loop import run_pools
from margin.judges.verdicts import JudgeCase, JudgeVerdict
from margin.runfolder import dumps, read_jsonl
from margin.serving.calls import CallSettings
from margin.serving.replay import cut_torn_tail
from margin.studies.cache import ReplyCache, default_cache_path
from margin.studies.calls import StudyCalls, StudyReplay, load_replay
from margin.studies.model_pools import model_limits, model_pool
from margin.studies.models import ModelReply
from margin.studies.plan import StudyPlan
from margin.util.safefiles import open_append

#: (model id, prompt id, transformation name or None for the original) -> response, None when missing
Responses = dict[tuple[str, str, str | None], ModelReply | None]
#: (judge index, model id, prompt id, transformation name) -> verdict, None when missing
Judgements = dict[tuple[int, str, str, str], JudgeVerdict | None]
OnBatch = Callable[[str, int, float], None]  # (model, requests, seconds) per call


@dataclass
class ResponseOutcome:
    responses: Responses = field(default_factory=dict)
    judgements: Judgements = field(default_factory=dict)
    sent: int = 0
    cached: int = 0
    replayed: int = 0
    missing: int = 0
    retries: int = 0
    hedges: int = 0
    restarts: int = 0


class _Receipts:
    def __init__(self, path: Path, run_id: str) -> None:
        self.run_id = run_id
        self.handle: IO[str] = open_append(path)  # closed by close()

    def write(self, record: dict[str, Any]) -> None:
        self.handle.write(dumps({"run_id": self.run_id, **record}) + "\n")
        self.handle.flush()

    def close(self) -> None:
        self.handle.close()


def collect(plan: StudyPlan, out_dir: Path, *, settings: CallSettings, resume: bool, cache: bool,
            on_batch: OnBatch = lambda *_: None,
            on_progress: Callable[[str], None] = lambda _: None) -> ResponseOutcome:
    receipts, replay = _open_receipts(out_dir / "calls.jsonl", resume)
    store = ReplyCache(default_cache_path()) if cache else None
    models = {m.id: m for m in plan.models}
    models.update({j.model.id: j.model for j in plan.judges if j.model is not None})
    pools = [model_pool(name, m.spec, m.max_tokens, settings, on_call=_reporter(name, on_batch))
             for name, m in models.items()]
    attempts = {name: model_limits(m.spec, settings).max_attempts for name, m in models.items()}
    calls = StudyCalls(max_attempts=attempts, retry_wait_s=settings.retry_wait_s, store=store, replay=replay,
                       on_record=receipts.write)
    calls.health.names = {m.id: f"model {m.id}" for m in plan.models}
    calls.health.names.update({j.model.id: f"judge {j.id} (model {_where(j.model.spec)})"
                               for j in plan.judges if j.model is not None})
    outcome = ResponseOutcome()
    texts = {(p.id, t.name): plan.transformed(p, t) for p in plan.prompts for t in plan.transformations}
    by_id = {p.id: p for p in plan.prompts}
    waiting = {"responses": len(plan.models) * len(plan.prompts) * (1 + len(plan.transformations))}

    def judge_when_ready(model_id: str, prompt_id: str, name: str) -> None:
        responses = outcome.responses
        if (model_id, prompt_id, None) not in responses or (model_id, prompt_id, name) not in responses:
            return  # the other response is still on its way
        original, transformed = responses[(model_id, prompt_id, None)], responses[(model_id, prompt_id, name)]
        if original is None or transformed is None:
            return  # a response is missing: nothing to judge (counted as response_missing)
        case = JudgeCase(by_id[prompt_id].text, original.text, texts[(prompt_id, name)], transformed.text)
        t = next(t for t in plan.transformations if t.name == name)
        for index, judge in enumerate(plan.judges):
            if judge.model is None:  # a rule judge decides at once: no call, no receipt
                outcome.judgements[(index, model_id, prompt_id, name)] = judge.judge.verdict(case)  # type: ignore[union-attr]
                continue

            def done(reply: ModelReply | None, key: tuple[int, str, str, str] = (index, model_id, prompt_id, name),
                     parse: Callable[[str], JudgeVerdict] = judge.judge.parse) -> None:
                outcome.judgements[key] = None if reply is None else parse(reply.text)

            tag = {"role": "judgement", "judge": judge.id, "model": model_id, "prompt_id": prompt_id,
                   "transform": t.transform, "strength": t.strength}
            calls.request(judge.model.id, judge.model.key, judge.judge.messages(case), tag, done)

    def responded(model_id: str, prompt_id: str, name: str | None) -> Callable[[ModelReply | None], None]:
        def done(reply: ModelReply | None) -> None:
            outcome.responses[(model_id, prompt_id, name)] = reply
            waiting["responses"] -= 1
            for t in plan.transformations if name is None else [n for n in plan.transformations if n.name == name]:
                judge_when_ready(model_id, prompt_id, t.name)
            if waiting["responses"] == 0:
                for judge in plan.judges:
                    if judge.model is not None:
                        calls.seal(judge.model.id)
                on_progress("responses done")
        return done

    _ask_for_responses(plan, texts, calls, responded)
    try:
        run_pools(calls.book, pools)
    finally:
        receipts.close()
        if store is not None:
            store.close()
    stats = calls.book.stats
    outcome.sent, outcome.cached, outcome.replayed = stats.sent, calls.counts.cached, calls.counts.replayed
    outcome.missing, outcome.retries, outcome.hedges = stats.missing, stats.retries, stats.hedges
    outcome.restarts = sum(p.figures.restarts + p.figures.timeouts for p in pools)
    return outcome


def _where(spec: Any) -> str:
    """A judge's model as a user wrote it: its served name, and its endpoint if it has one."""
    return spec.model + (f" at {public_url(spec.base_url)}" if spec.base_url else "")


def _reporter(name: str, on_batch: OnBatch) -> Callable[[int, int, float], None]:
    return lambda requests, _capacity, seconds: on_batch(name, requests, seconds)


def _open_receipts(path: Path, resume: bool) -> tuple[_Receipts, StudyReplay | None]:
    """The study's call receipts, opened for appending, and on resume what they already hold
    (to replay) under the run id they were written with."""
    replay = None
    run_id = None
    if resume and path.exists():
        cut_torn_tail(path)
        records = list(read_jsonl(path))
        replay = load_replay(records)
        run_id = next((r.get("run_id") for r in records if r.get("run_id")), None)
    return _Receipts(path, run_id or secrets.token_hex(8)), replay


def _ask_for_responses(plan: StudyPlan, texts: dict[tuple[str, str], str], calls: StudyCalls,
                       responded: Callable[[str, str, str | None], Callable[[ModelReply | None], None]]) -> None:
    """Every protected model's response to every prompt, original and transformed."""
    for model in plan.models:
        for prompt in plan.prompts:
            items: list[tuple[str | None, str, str | None, str | None]] = [(None, prompt.text, None, None)]
            items += [(t.name, texts[(prompt.id, t.name)], t.transform, t.strength) for t in plan.transformations]
            for name, text, transform, strength in items:
                tag = {"role": "response", "model": model.id, "prompt_id": prompt.id, "transform": transform,
                       "strength": strength}
                calls.request(model.id, model.key, [{"role": "user", "content": text}], tag,
                              responded(model.id, prompt.id, name))
        calls.seal(model.id)
