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
from typing import IO, Any, NamedTuple

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


class ResponseKey(NamedTuple):
    """One protected model's response to one text: a prompt, or its transformation (by name;
    None for the prompt itself)."""

    model: str
    prompt: str
    transformation: str | None


class JudgementKey(NamedTuple):
    """One judge's verdict (by its index: 0 the judge, 1 the second judge) on one model's two
    responses to a prompt and to its transformation."""

    judge: int
    model: str
    prompt: str
    transformation: str


#: response, None when missing (no output after every retry)
Responses = dict[ResponseKey, ModelReply | None]
#: verdict, None when missing
Judgements = dict[JudgementKey, JudgeVerdict | None]
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
    """Every protected model's responses and every judge's verdicts (`Collection`)."""
    return Collection(plan, out_dir, settings=settings, resume=resume, cache=cache, on_batch=on_batch,
                      on_progress=on_progress).run()


class Collection:
    """One study's model and judge calls, on one request book: every response is asked for up
    front (`ask_for_responses`); as each arrives (`responded`), every judge is asked about each
    pair it completes (`judge_when_ready`); once the last response is in, the judges' pools are
    sealed. `run` drives the pools to the end and closes the receipts and the cache."""

    def __init__(self, plan: StudyPlan, out_dir: Path, *, settings: CallSettings, resume: bool, cache: bool,
                 on_batch: OnBatch, on_progress: Callable[[str], None]) -> None:
        self.plan = plan
        self.on_progress = on_progress
        self.receipts, replay = _open_receipts(out_dir / "calls.jsonl", resume)
        self.store = ReplyCache(default_cache_path()) if cache else None
        models = {m.id: m for m in plan.models}
        models.update({j.model.id: j.model for j in plan.judges if j.model is not None})
        self.pools = [model_pool(name, m.spec, m.max_tokens, settings, on_call=_reporter(name, on_batch))
                      for name, m in models.items()]
        attempts = {name: model_limits(m.spec, settings).max_attempts for name, m in models.items()}
        self.calls = StudyCalls(max_attempts=attempts, retry_wait_s=settings.retry_wait_s, store=self.store,
                                replay=replay, on_record=self.receipts.write)
        self.calls.health.names = {m.id: f"model {m.id}" for m in plan.models}
        self.calls.health.names.update({j.model.id: f"judge {j.id} (model {_where(j.model.spec)})"
                                        for j in plan.judges if j.model is not None})
        self.outcome = ResponseOutcome()
        self.texts = {(p.id, t.name): plan.transformed(p, t) for p in plan.prompts for t in plan.transformations}
        self.by_id = {p.id: p for p in plan.prompts}
        self.waiting = len(plan.models) * len(plan.prompts) * (1 + len(plan.transformations))

    def run(self) -> ResponseOutcome:
        self.ask_for_responses()
        try:
            run_pools(self.calls.book, self.pools)
        finally:
            self.receipts.close()
            if self.store is not None:
                self.store.close()
        outcome, stats = self.outcome, self.calls.book.stats
        outcome.sent, outcome.cached, outcome.replayed = stats.sent, self.calls.counts.cached, self.calls.counts.replayed
        outcome.missing, outcome.retries, outcome.hedges = stats.missing, stats.retries, stats.hedges
        outcome.restarts = sum(p.figures.restarts + p.figures.timeouts for p in self.pools)
        return outcome

    def ask_for_responses(self) -> None:
        """Every protected model's response to every prompt, original and transformed."""
        for model in self.plan.models:
            for prompt in self.plan.prompts:
                items: list[tuple[str | None, str, str | None, str | None]] = [(None, prompt.text, None, None)]
                items += [(t.name, self.texts[(prompt.id, t.name)], t.transform, t.strength)
                          for t in self.plan.transformations]
                for name, text, transform, strength in items:
                    tag = {"role": "response", "model": model.id, "prompt_id": prompt.id, "transform": transform,
                           "strength": strength}
                    self.calls.request(model.id, model.key, [{"role": "user", "content": text}], tag,
                                       self.responded(ResponseKey(model.id, prompt.id, name)))
            self.calls.seal(model.id)

    def responded(self, key: ResponseKey) -> Callable[[ModelReply | None], None]:
        def done(reply: ModelReply | None) -> None:
            self.outcome.responses[key] = reply
            self.waiting -= 1
            transformations = self.plan.transformations
            for t in transformations if key.transformation is None else [
                    n for n in transformations if n.name == key.transformation]:
                self.judge_when_ready(key.model, key.prompt, t.name)
            if self.waiting == 0:
                for judge in self.plan.judges:
                    if judge.model is not None:
                        self.calls.seal(judge.model.id)
                self.on_progress("responses done")
        return done

    def judge_when_ready(self, model_id: str, prompt_id: str, name: str) -> None:
        """Every judge's verdict on the model's two responses (to the prompt and to its
        transformation `name`), once both are in; none when either is missing."""
        responses = self.outcome.responses
        before, after = ResponseKey(model_id, prompt_id, None), ResponseKey(model_id, prompt_id, name)
        if before not in responses or after not in responses:
            return  # the other response is still on its way
        original, transformed = responses[before], responses[after]
        if original is None or transformed is None:
            return  # a response is missing: nothing to judge (counted as response_missing)
        case = JudgeCase(self.by_id[prompt_id].text, original.text, self.texts[(prompt_id, name)], transformed.text)
        t = next(t for t in self.plan.transformations if t.name == name)
        for index, judge in enumerate(self.plan.judges):
            key = JudgementKey(index, model_id, prompt_id, name)
            if judge.model is None:  # a rule judge decides at once: no call, no receipt
                self.outcome.judgements[key] = judge.judge.verdict(case)  # type: ignore[union-attr]
                continue
            tag = {"role": "judgement", "judge": judge.id, "model": model_id, "prompt_id": prompt_id,
                   "transform": t.transform, "strength": t.strength}
            self.calls.request(judge.model.id, judge.model.key, judge.judge.messages(case), tag,
                               self._judged(key, judge.judge.parse))

    def _judged(self, key: JudgementKey, parse: Callable[[str], JudgeVerdict]) -> Callable[[ModelReply | None], None]:
        def done(reply: ModelReply | None) -> None:
            self.outcome.judgements[key] = None if reply is None else parse(reply.text)
        return done


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
