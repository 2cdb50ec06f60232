"""vLLM offline (the `vllm` extra, GPU): `LLM.chat` with prefix caching.

Chat requests are grouped by their template kwargs and sent to `LLM.chat` in one call per
group (vLLM renders with the checkpoint's chat template and encodes without a second BOS);
raw prompts go as token ids. Greedy, top logprobs. Prompts over `max_model_len` get an
error, never truncated. Not exercised by the test suite (no GPU, and vllm pins its own
torch); the request / output shapes match the transformers backend's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from margin.backends.generation import Generation, GuardRequest, Step
from margin.backends.transformers_lm import ContextLengthError
from margin.errors import InputError

log = logging.getLogger(__name__)


class VLLMBackend:
    def __init__(self, model: str, revision: str | None = None, *, adapter: str | None = None,
                 top_logprobs: int = 20, engine: dict[str, Any] | None = None) -> None:
        try:
            import vllm
            from vllm.lora.request import LoRARequest
        except ImportError:
            raise InputError("the vllm backend needs the extra: pip install 'margin[vllm]'", field="--backend") from None
        self.vllm = vllm
        options = {"enable_prefix_caching": True, "seed": 0, **(engine or {})}
        if adapter:
            options["enable_lora"] = True
        self.llm = vllm.LLM(model=model, revision=revision, **options)
        self.lora = LoRARequest("adapter", 1, adapter) if adapter else None
        self.tokenizer = self.llm.get_tokenizer()
        self.context = int(self.llm.llm_engine.model_config.max_model_len)
        self.top_logprobs = top_logprobs

    def _ids(self, request: GuardRequest) -> list[int]:
        if request.prompt is not None:
            return list(self.tokenizer.encode(request.prompt, add_special_tokens=False))
        ids = self.tokenizer.apply_chat_template(list(request.messages or ()), tokenize=True,
                                                 add_generation_prompt=request.add_generation_prompt,
                                                 return_dict=False, **request.chat_template_kwargs)
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)

    def generate(self, requests: Sequence[GuardRequest]) -> list[Generation | Exception]:
        results: list[Generation | Exception] = [RuntimeError("not run")] * len(requests)
        groups: dict[str, list[tuple[int, GuardRequest]]] = {}
        for i, request in enumerate(requests):
            ids = self._ids(request)
            if len(ids) + request.max_new_tokens > self.context:
                results[i] = ContextLengthError(f"input is {len(ids)} tokens + {request.max_new_tokens} to generate, "
                                                f"over max_model_len {self.context} (never truncated)")
                log.warning("%s", results[i])
                continue
            key = json.dumps([request.prompt is None, request.chat_template_kwargs, request.add_generation_prompt,
                              request.max_new_tokens, request.keep_special_tokens], sort_keys=True)
            groups.setdefault(key, []).append((i, request))
        for items in groups.values():
            first = items[0][1]
            params = self.vllm.SamplingParams(temperature=0, max_tokens=first.max_new_tokens,
                                              logprobs=self.top_logprobs,
                                              skip_special_tokens=not first.keep_special_tokens)
            if first.prompt is not None:
                prompts = [self.vllm.TokensPrompt(prompt_token_ids=self._ids(r)) for _, r in items]
                outputs = self.llm.generate(prompts, params, lora_request=self.lora, use_tqdm=False)
            else:
                outputs = self.llm.chat([list(r.messages or ()) for _, r in items], params,
                                        add_generation_prompt=first.add_generation_prompt,
                                        chat_template_kwargs=first.chat_template_kwargs or None,
                                        lora_request=self.lora, use_tqdm=False)
            for (i, _), output in zip(items, outputs, strict=True):
                results[i] = self._generation(output.outputs[0])
        return results

    def _generation(self, completion: Any) -> Generation:
        steps = []
        for token_id, candidates in zip(completion.token_ids, completion.logprobs or [], strict=False):
            top = tuple((str(lp.decoded_token), float(lp.logprob)) for lp in candidates.values())
            chosen = candidates.get(token_id)
            steps.append(Step(str(chosen.decoded_token) if chosen else self.tokenizer.decode([token_id]), top))
        return Generation(text=completion.text, steps=tuple(steps), raw=completion.text,
                          truncated=completion.finish_reason == "length")

    def close(self) -> None:
        del self.llm
