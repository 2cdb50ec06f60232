"""Local causal LMs through transformers: chat templates, greedy decoding, logprobs, padded batches.

Prompts are rendered with the checkpoint's own chat template (or taken raw) and tokenized
once, without a second BOS; batches are left-padded. Logprobs come from the raw logits
(`output_logits`), not from processed scores. A prompt that does not fit the context with
its token budget gets no output and an error: it is never truncated.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from margin.errors import InputError
from margin.guards.generation import Generation, GuardRequest, Step

log = logging.getLogger(__name__)


class ContextLengthError(ValueError):
    """An input longer than the model's context: margin never truncates."""


class TransformersLM:
    def __init__(self, model: str, revision: str | None = None, *, adapter: str | None = None,
                 auto_class: str = "causal", device: str | None = None, dtype: str | None = None,
                 top_logprobs: int = 20) -> None:
        import torch
        import transformers

        self.torch = torch
        self.top_logprobs = top_logprobs
        kwargs: dict[str, Any] = {"revision": revision}
        if dtype:
            kwargs["dtype"] = getattr(torch, dtype)
        if auto_class == "image-text-to-text":  # Llama Guard 4: a processor renders the template
            self.renderer: Any = transformers.AutoProcessor.from_pretrained(model, revision=revision)
            self.tokenizer: Any = self.renderer.tokenizer
            net = transformers.AutoModelForImageTextToText.from_pretrained(model, **kwargs)
        else:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(model, revision=revision)
            self.renderer = self.tokenizer
            net = transformers.AutoModelForCausalLM.from_pretrained(model, **kwargs)
        if adapter:  # a LoRA adapter on the base (NemoGuard v2)
            try:
                from peft import PeftModel
            except ImportError:
                raise InputError(f"{adapter} is a LoRA adapter: `pip install peft` to load it", field="--guard") from None
            net = PeftModel.from_pretrained(net, adapter)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model: Any = net.to(self.device).eval()  # type: ignore[arg-type]
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self.context = context_length(self.model.config, self.tokenizer)
        self.token_text: dict[int, str] = {}
        eos = self.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            self.eos_ids.add(self.tokenizer.eos_token_id)

    def render(self, request: GuardRequest) -> list[int]:
        if request.prompt is not None:
            # The raw prompt carries its own BOS text: no second one.
            return list(self.tokenizer(request.prompt, add_special_tokens=False)["input_ids"])
        ids = self.renderer.apply_chat_template(
            list(request.messages or ()), add_generation_prompt=request.add_generation_prompt,
            tokenize=True, return_dict=False, **request.chat_template_kwargs)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        if ids and isinstance(ids[0], list):
            ids = ids[0]
        return [int(i) for i in ids]

    def generate(self, requests: Sequence[GuardRequest]) -> list[Generation | Exception]:
        """One Generation per request, or the error that kept it from having one."""
        results: list[Generation | Exception] = [ContextLengthError("not run")] * len(requests)
        groups: dict[tuple[int, bool], list[tuple[int, list[int]]]] = {}
        for i, request in enumerate(requests):
            try:
                ids = self.render(request)
            except Exception as exc:  # a template that rejects the input: no output for it
                results[i] = exc
                continue
            if self.context is not None and len(ids) + request.max_new_tokens > self.context:
                results[i] = ContextLengthError(
                    f"input is {len(ids)} tokens + {request.max_new_tokens} to generate, "
                    f"over the {self.context}-token context (never truncated)")
                log.warning("%s", results[i])
                continue
            groups.setdefault((request.max_new_tokens, request.keep_special_tokens), []).append((i, ids))
        for (max_new, keep_special), items in groups.items():
            for index, generation in zip((i for i, _ in items),
                                         self._generate([ids for _, ids in items], max_new, keep_special),
                                         strict=True):
                results[index] = generation
        return results

    def _generate(self, prompts: list[list[int]], max_new_tokens: int, keep_special: bool) -> list[Generation]:
        torch = self.torch
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):  # left padding
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            mask[row, width - len(ids):] = 1
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                temperature=None, top_p=None, top_k=None,
                output_logits=True, return_dict_in_generate=True, pad_token_id=self.pad_id)
        new = out.sequences[:, width:].tolist()
        logprobs = [torch.log_softmax(step.float(), dim=-1) for step in out.logits]
        generations = []
        for row, tokens in enumerate(new):
            steps, kept, ended = [], [], False
            for k, token in enumerate(tokens):
                if ended:
                    break
                kept.append(token)
                ended = token in self.eos_ids
                values, indices = logprobs[k][row].topk(self.top_logprobs)
                top = [(self.decode_one(int(i)), float(v)) for v, i in zip(values, indices, strict=True)]
                if token not in indices.tolist():
                    top.append((self.decode_one(token), float(logprobs[k][row, token])))
                steps.append(Step(self.decode_one(token), tuple(top)))
            text = self.tokenizer.decode(kept, skip_special_tokens=not keep_special)
            raw = self.tokenizer.decode(kept, skip_special_tokens=False)
            generations.append(Generation(text=text, steps=tuple(steps), raw=raw, truncated=not ended))
        return generations

    def decode_one(self, token: int) -> str:
        text = self.token_text.get(token)
        if text is None:  # decoding one id at a time is slow: remember each token's text
            text = self.token_text[token] = str(self.tokenizer.decode([token], skip_special_tokens=False))
        return text


def context_length(config: Any, tokenizer: Any) -> int | None:
    """The model's context in tokens: its position limit, else the tokenizer's."""
    for cfg in (config, getattr(config, "text_config", None)):
        value = getattr(cfg, "max_position_embeddings", None) if cfg is not None else None
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value < 10**7 else None
