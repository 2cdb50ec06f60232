"""Local causal LMs through transformers: chat templates, greedy decoding, logprobs, padded batches.

Prompts are rendered with the checkpoint's own chat template (or taken raw) and tokenized
once, without a second BOS; batches are left-padded. Logprobs come from the raw logits
(`output_logits`), not from processed scores. A prompt that does not fit the context with
its token budget gets no output and an error: it is never truncated. A GGUF file
(`margin.backends.gguf`) loads dequantized, with the tokenizer and chat template it holds.

Shared prefixes (`share_prefix`): the template tokens every request of a guard starts with
are run once, and their keys and values are reused for every batch; a case with a
conversation, whose candidates all start with the same turns, registers its own longer prefix
(`use_prefix`), kept while its search uses it; only each request's
suffix is computed, with the prefix's cache copied over the batch, the suffixes left-padded
after it (padding masked, positions counted from the mask, so each suffix token sits where
it sits in the full prompt). Requests that do not start with a registered prefix, and
models whose cache would not reproduce the full computation (`prefix.cache_is_exact`), run
whole.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from margin.backends import prefix as shared
from margin.backends.generation import Generation, GuardRequest, Step
from margin.backends.gguf import is_gguf, location
from margin.backends.lengths import length_chunks
from margin.errors import InputError, UnanswerableInput

log = logging.getLogger(__name__)


class ContextLengthError(UnanswerableInput, ValueError):
    """An input longer than the model's context: margin never truncates, nor retries it."""


class _OneByOne(Exception):
    """A batch to render request by request."""


class TransformersLM:
    def __init__(self, model: str, revision: str | None = None, *, adapter: str | None = None,
                 auto_class: str = "causal", device: str | None = None, dtype: str | None = None,
                 top_logprobs: int = 20, prefix_cache: bool = True) -> None:
        import torch
        import transformers

        self.torch = torch
        self.top_logprobs = top_logprobs
        kwargs: dict[str, Any] = {"revision": revision}
        if dtype:
            kwargs["dtype"] = getattr(torch, dtype)
        if is_gguf(model):  # a GGUF file: its folder, the file named; dequantized on load
            model, name = location(model)
            kwargs = {**kwargs, "revision": None, "gguf_file": name}
            if auto_class != "causal":
                raise InputError(f"a GGUF file loads as a causal LM only, not {auto_class}", field="--model")
            self.tokenizer: Any = transformers.AutoTokenizer.from_pretrained(model, gguf_file=name)
            self.renderer: Any = self.tokenizer
            net = transformers.AutoModelForCausalLM.from_pretrained(model, **kwargs)
        elif auto_class == "image-text-to-text":  # Llama Guard 4: a processor renders the template
            self.renderer = transformers.AutoProcessor.from_pretrained(model, revision=revision)
            self.tokenizer = self.renderer.tokenizer
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
        # Shared prefixes: token ids -> their key/value cache for one row (computed on first use),
        # least recently registered first; the template's are pinned, cases' come and go.
        self.prefixes: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self.pinned: set[tuple[int, ...]] = set()
        why = "turned off" if not prefix_cache else (
            "a processor model" if auto_class == "image-text-to-text" else shared.cache_is_exact(self.model))
        self.prefix_off_reason: str | None = why
        if why is not None and prefix_cache:
            log.info("shared-prefix reuse off for %s: %s", model, why)
        self.cache_kwarg = cache_kwarg(self.model)
        self.stats = dict.fromkeys(("prefix_rows", "full_rows", "batches", "run_tokens", "padded_tokens"), 0)
        # Rows run together by length (see `lengths`). On a GPU a chunk must be big enough that
        # generate()'s fixed cost per call (tens of ms) stays small beside its compute; the
        # upper bound keeps an 8B model's key/value cache for a chunk near 17 GB.
        gpu = str(self.device).startswith("cuda")
        self.chunking = {"min_tokens": 32768 if gpu else 512, "max_tokens": 131072 if gpu else 16384}

    def prefix_of(self, requests: Sequence[GuardRequest]) -> tuple[int, ...]:
        """The token ids that `requests` (one guard request rendered around different probe
        texts) share; () when reuse is off or the shared run is too short to be worth it."""
        if self.prefix_off_reason is not None:
            return ()
        try:
            common = shared.common_prefix([self.render(r) for r in requests])
        except Exception as exc:  # a template that rejects a probe: run every request whole
            log.info("shared-prefix reuse off: a probe did not render (%s)", exc)
            return ()
        return common if len(common) >= shared.MIN_PREFIX_TOKENS else ()

    def share_prefix(self, requests: Sequence[GuardRequest]) -> int:
        """Register the template prefix that `requests` share, for good; returns its length
        in tokens, 0 when none is used."""
        common = self.prefix_of(requests)
        if common:
            self.prefixes.setdefault(common, None)
            self.pinned.add(common)
        return len(common)

    def use_prefix(self, common: tuple[int, ...]) -> None:
        """Register a case's own prefix (its conversation up to the target turn) for the
        requests to come. Cases come and go as their searches do: beyond `CASE_PREFIXES`, the
        least recently used case prefix is forgotten with its cache."""
        if not common or common in self.pinned:
            return
        self.prefixes.setdefault(common, None)
        self.prefixes.move_to_end(common)
        unpinned = [p for p in self.prefixes if p not in self.pinned]
        for old in unpinned[:max(0, len(unpinned) - shared.CASE_PREFIXES)]:
            del self.prefixes[old]

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

    def render_many(self, requests: Sequence[GuardRequest]) -> list[list[int] | Exception]:
        """`render` for each request, tokenizing requests of the same shape in one call: the
        tokenizer then encodes them in parallel (one by one, the encoding of a long template
        would keep a GPU waiting). A batch the template rejects is rendered one by one, so
        only the requests it rejects get their error."""
        out: list[list[int] | Exception] = [[] for _ in requests]
        shapes: dict[str, list[int]] = {}
        for i, r in enumerate(requests):
            key = "prompt" if r.prompt is not None else repr((sorted(r.chat_template_kwargs.items()),
                                                              r.add_generation_prompt))
            shapes.setdefault(key, []).append(i)
        for key, rows in shapes.items():
            try:
                if self.renderer is not self.tokenizer or len(rows) == 1:
                    raise _OneByOne
                first = requests[rows[0]]
                if key == "prompt":
                    batch = self.tokenizer([requests[i].prompt for i in rows], add_special_tokens=False)["input_ids"]
                else:
                    batch = self.renderer.apply_chat_template(
                        [list(requests[i].messages or ()) for i in rows], add_generation_prompt=first.add_generation_prompt,
                        tokenize=True, return_dict=False, **first.chat_template_kwargs)
                for i, ids in zip(rows, batch, strict=True):
                    out[i] = [int(t) for t in ids]
            except Exception:
                for i in rows:
                    try:
                        out[i] = self.render(requests[i])
                    except Exception as exc:  # a template that rejects the input: no output for it
                        out[i] = exc
        return out

    def generate(self, requests: Sequence[GuardRequest]) -> list[Generation | Exception]:
        """One Generation per request, or the error that kept it from having one."""
        results: list[Generation | Exception] = [ContextLengthError("not run")] * len(requests)
        groups: dict[tuple[int, bool, tuple[int, ...] | None], list[tuple[int, list[int]]]] = {}
        for i, (request, ids) in enumerate(zip(requests, self.render_many(requests), strict=True)):
            if isinstance(ids, Exception):
                results[i] = ids
                continue
            if self.context is not None and len(ids) + request.max_new_tokens > self.context:
                results[i] = ContextLengthError(
                    f"input is {len(ids)} tokens + {request.max_new_tokens} to generate, "
                    f"over the {self.context}-token context (never truncated)")
                log.warning("%s", results[i])
                continue
            common = shared.match(ids, list(self.prefixes)) if self.prefixes else None
            groups.setdefault((request.max_new_tokens, request.keep_special_tokens, common), []).append((i, ids))
        for (max_new, keep_special, common), items in groups.items():
            skip = len(common) if common else 0
            self.stats["prefix_rows" if common else "full_rows"] += len(items)
            for chunk in length_chunks([len(ids) - skip for _, ids in items], prefix=skip, **self.chunking):
                mine = [items[k] for k in chunk]
                for (index, _), generation in zip(
                        mine, self._generate([ids for _, ids in mine], max_new, keep_special, common), strict=True):
                    results[index] = generation
        return results

    def _generate(self, prompts: list[list[int]], max_new_tokens: int, keep_special: bool,
                  common: tuple[int, ...] | None = None) -> list[Generation]:
        """Greedy generation for `prompts`, left-padded; with `common`, the prefix they all
        start with comes from its cache and only the rest of each prompt is run."""
        torch = self.torch
        skip = len(common) if common else 0
        width = max(len(p) for p in prompts) - skip  # the padded width of what is run
        self.stats["batches"] += 1
        self.stats["run_tokens"] += sum(len(p) - skip for p in prompts)
        self.stats["padded_tokens"] += len(prompts) * width
        input_ids = torch.full((len(prompts), skip + width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), skip + width), dtype=torch.long)
        if common:  # the prefix first, then each suffix left-padded after it
            input_ids[:, :skip] = torch.tensor(common, dtype=torch.long)
            mask[:, :skip] = 1
        for row, ids in enumerate(prompts):
            rest = ids[skip:]
            input_ids[row, skip + width - len(rest):] = torch.tensor(rest, dtype=torch.long)
            mask[row, skip + width - len(rest):] = 1
        extra = {self.cache_kwarg: self.prefix_cache(common, len(prompts))} if common else {}
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device),
                max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                temperature=None, top_p=None, top_k=None,
                output_logits=True, return_dict_in_generate=True, pad_token_id=self.pad_id, **extra)
        sequences = out.sequences[:, skip + width:]
        # Per step, every row's top candidates and its chosen token's logprob, moved off the
        # device in one transfer each (element by element, a GPU would wait on every one).
        tops = []
        for k, logits in enumerate(out.logits):
            logprobs = torch.log_softmax(logits.float(), dim=-1)
            values, indices = logprobs.topk(self.top_logprobs, dim=-1)
            chosen = logprobs.gather(1, sequences[:, k:k + 1]).squeeze(1)
            tops.append((values.tolist(), indices.tolist(), chosen.tolist()))
        generations = []
        for row, tokens in enumerate(sequences.tolist()):
            steps, kept, ended = [], [], False
            for k, token in enumerate(tokens):
                if ended:
                    break
                kept.append(token)
                ended = token in self.eos_ids
                values, indices, chosen = (part[row] for part in tops[k])
                top = [(self.decode_one(i), v) for v, i in zip(values, indices, strict=True)]
                if token not in indices:
                    top.append((self.decode_one(token), chosen))
                steps.append(Step(self.decode_one(token), tuple(top)))
            # The end token that stopped generation is not text (a server's text leaves it out
            # too): with special tokens kept, a reply `1<|im_end|>` would read as `1<|im_end|>`.
            text = self.tokenizer.decode(kept[:-1] if ended else kept, skip_special_tokens=not keep_special)
            raw = self.tokenizer.decode(kept, skip_special_tokens=False)
            generations.append(Generation(text=text, steps=tuple(steps), raw=raw, truncated=not ended))
        return generations

    def prefix_cache(self, common: tuple[int, ...], rows: int) -> Any:
        """A fresh cache holding `common`'s keys and values for `rows` rows (generation
        extends it, so each batch gets its own copy of the one computed once)."""
        torch = self.torch
        from transformers import DynamicCache

        layers = self.prefixes.get(common)
        if layers is None:
            with torch.inference_mode():
                out = self.model(input_ids=torch.tensor([common], dtype=torch.long, device=self.device),
                                 use_cache=True, logits_to_keep=1)
            cache = getattr(out, self.cache_kwarg)
            layers = self.prefixes[common] = [(layer.keys, layer.values) for layer in cache.layers]
        return DynamicCache([(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1)) for k, v in layers])

    def close(self) -> None:
        """Let go of the weights and cached prefixes (and the GPU memory they held)."""
        import torch

        self.prefixes.clear()
        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()

    def decode_one(self, token: int) -> str:
        text = self.token_text.get(token)
        if text is None:  # decoding one id at a time is slow: remember each token's text
            text = self.token_text[token] = str(self.tokenizer.decode([token], skip_special_tokens=False))
        return text


def cache_kwarg(model: Any) -> str:
    """What this transformers calls the key/value cache argument (`cache` from 5.x on)."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def context_length(config: Any, tokenizer: Any) -> int | None:
    """The model's context in tokens: its position limit, else the tokenizer's."""
    for cfg in (config, getattr(config, "text_config", None)):
        value = getattr(cfg, "max_position_embeddings", None) if cfg is not None else None
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value < 10**7 else None
