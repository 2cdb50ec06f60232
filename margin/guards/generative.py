"""A generative guard: a family adapter over a backend, with a threshold.

The adapter decides what is sent and how outputs read; the backend decides how requests
reach a model. A text whose requests produced no output gets None (retried by the engine,
then missing); a completed but unreadable output is `invalid`. With a probability, the
verdict is p_unsafe >= threshold; without one, the parsed label stands.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from margin.backends.generation import Generation, GuardRequest
from margin.backends.secrets import redact
from margin.errors import UnanswerableInput
from margin.guards.adapters.base import Adapter
from margin.guards.base import Guard, apply_threshold
from margin.types import Exchange, GuardInfo, Turn, Verdict

log = logging.getLogger(__name__)


class GenerationBackend(Protocol):
    def generate(self, requests: Sequence[GuardRequest]) -> list[Generation | Exception]: ...

    def close(self) -> None: ...


class RemoteBackend(GenerationBackend, Protocol):
    remote: bool

    async def agenerate(self, request: GuardRequest) -> Generation: ...

    async def aclose(self) -> None: ...


def raw_output(outputs: Sequence[Generation]) -> str:
    """What the model said, for the receipts: the text, or every part where there are several."""
    parts = [{"reasoning": o.reasoning, "text": o.text} if o.reasoning is not None else
             (o.raw if o.raw is not None else o.text) for o in outputs]
    if len(parts) == 1 and isinstance(parts[0], str):
        return redact(parts[0])
    return redact(json.dumps(parts, ensure_ascii=False))


class GenerativeGuard(Guard):
    def __init__(self, adapter: Adapter, backend: GenerationBackend, info: GuardInfo, *, max_batch_size: int = 16) -> None:
        self.adapter = adapter
        self.backend = backend
        # the cases its template renders; whole cases reach `requests` as they are
        self.shapes = adapter.shapes_for(adapter.variant)
        self._info = info
        self.max_batch_size = max_batch_size
        self.remote = bool(getattr(backend, "remote", False))
        self.prefix_tokens = self.share_prefixes()
        self._case_prefixes: OrderedDict[Exchange, list[tuple[int, ...]]] = OrderedDict()  # case -> its prefixes
        # Asked for logprobs (top_logprobs > 0) but got no p_unsafe: said once per guard.
        self._warn_unscored = bool(getattr(backend, "top_logprobs", 0))

    def share_prefixes(self) -> list[int]:
        """Tell a backend that can reuse a shared template prefix (transformers) what each of
        the adapter's requests looks like around different texts; the lengths it shares."""
        share = getattr(self.backend, "share_prefix", None)
        if share is None:
            return []
        from margin.backends.prefix import PROBES

        slots = [self.adapter.requests(probe) for probe in PROBES]
        if len({len(s) for s in slots}) != 1:  # requests that depend on the text: nothing shared
            return []
        return [share(list(requests)) for requests in zip(*slots, strict=True)]

    def use_case_prefixes(self, texts: Sequence[str | Exchange]) -> None:
        """Tell a backend that reuses prefixes each case's own (`margin.backends.prefix`): a
        whole case with a conversation, a policy or context starts every candidate with the
        same template and turns, longer than the template prefix (for Llama Guard a response
        even differs from it in the task line). Found once per case, by probing its target turn."""
        use = getattr(self.backend, "use_prefix", None)
        if use is None or self.backend.prefix_off_reason is not None:  # type: ignore[attr-defined]
            return
        from margin.backends.prefix import CASE_PREFIXES, PROBES

        for case in texts:
            if not isinstance(case, Exchange) or (len(case.messages) == 1 and not case.policy and not case.context):
                continue  # a lone prompt: the template prefix is its natural one
            key = case._replace(messages=case.messages[:-1])
            found = self._case_prefixes.get(key)
            if found is None:
                role = case.messages[-1].role
                # whole-case adapters take an Exchange where the base Adapter says str
                slots = [self.adapter.requests(case._replace(messages=(*key.messages, Turn(role, probe))))  # type: ignore[arg-type]
                         for probe in PROBES]
                prefix_of = self.backend.prefix_of  # type: ignore[attr-defined]
                found = [prefix_of(list(r)) for r in zip(*slots, strict=True)] if len({len(s) for s in slots}) == 1 else []
                self._case_prefixes[key] = found
                while len(self._case_prefixes) > CASE_PREFIXES:
                    self._case_prefixes.popitem(last=False)
            self._case_prefixes.move_to_end(key)
            for common in found:
                use(common)

    @property
    def info(self) -> GuardInfo:
        return self._info

    def classify(self, texts: Sequence[str]) -> list[Verdict | UnanswerableInput | None]:
        self.use_case_prefixes(texts)
        requests: list[GuardRequest] = []
        spans: list[tuple[int, int]] = []
        for text in texts:
            batch = self.adapter.requests(text)
            spans.append((len(requests), len(requests) + len(batch)))
            requests.extend(batch)
        outputs = self.backend.generate(requests)
        if len(outputs) != len(requests):
            raise RuntimeError(f"backend returned {len(outputs)} outputs for {len(requests)} requests")
        verdicts: list[Verdict | UnanswerableInput | None] = []
        errors: list[Exception] = []
        for text, (start, end) in zip(texts, spans, strict=True):
            mine = outputs[start:end]
            failed = [o for o in mine if isinstance(o, Exception)]
            if failed:
                errors.extend(failed)
                # an input over the context stays so: the engine tries it once, with its reason
                verdicts.append(next((e for e in failed if isinstance(e, UnanswerableInput)), None))
                continue
            verdicts.append(self._verdict(text, [o for o in mine if isinstance(o, Generation)]))
        if errors and all(v is None for v in verdicts):
            # Nothing came back: raise, so the error text reaches the receipts.
            raise RuntimeError(redact(f"{type(errors[0]).__name__}: {errors[0]}"))
        return verdicts

    async def aclassify(self, texts: Sequence[str]) -> list[Verdict]:
        backend: RemoteBackend = self.backend  # type: ignore[assignment]
        verdicts = []
        for text in texts:
            outputs = await asyncio.gather(*(backend.agenerate(r) for r in self.adapter.requests(text)))
            verdicts.append(self._verdict(text, list(outputs)))
        return verdicts

    def _verdict(self, case: str | Exchange, outputs: list[Generation]) -> Verdict:
        parsed = self.adapter.verdict(case, outputs)
        verdict = apply_threshold(parsed, self._info.threshold)
        if verdict.label != parsed.label:
            verdict = verdict._replace(reply=parsed.label)
        elif parsed.label != "invalid" and parsed.p_unsafe is None and self._warn_unscored:
            self._warn_unscored = False
            log.warning("%s: the output has no logprobs holding every decision label, so its verdict has no "
                        "p_unsafe and the reply's text decides (said once; `margin report` counts them)",
                        self._info.id)
        return verdict._replace(raw=raw_output(outputs))

    def close(self) -> None:
        self.backend.close()

    async def aclose(self) -> None:
        if self.remote:
            await self.backend.aclose()  # type: ignore[attr-defined]
        else:
            self.close()
