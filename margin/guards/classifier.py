"""Sequence-classifier guards (Prompt Guard 2, ProtectAI DeBERTa) on transformers.

The raw text goes in untruncated; a text longer than the classifier's window gets no output
and an error. Batches are padded; p_unsafe is the attack class's softmax probability.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from margin.errors import UnanswerableInput
from margin.guards.adapters.sequence_classifier import SequenceClassifier
from margin.guards.base import Guard, apply_threshold, over_window
from margin.types import GuardInfo, Verdict


class ClassifierGuard(Guard):
    def __init__(self, adapter: SequenceClassifier, info: GuardInfo, model: str, revision: str | None, *,
                 device: str | None = None, max_batch_size: int = 32) -> None:
        import torch
        import transformers

        self.torch = torch
        self.adapter = adapter
        self._info = info
        self.max_batch_size = max_batch_size
        self.tokenizer: Any = transformers.AutoTokenizer.from_pretrained(model, revision=revision)
        net = transformers.AutoModelForSequenceClassification.from_pretrained(model, revision=revision)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = net.to(self.device).eval()
        self.index = adapter.attack_index({int(k): v for k, v in self.model.config.id2label.items()})
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model.config.pad_token_id = self.tokenizer.pad_token_id
        window = getattr(self.model.config, "max_position_embeddings", None) or adapter.context_tokens
        self.context = min(adapter.context_tokens, int(window))

    @property
    def info(self) -> GuardInfo:
        return self._info

    def classify(self, texts: Sequence[str]) -> list[Verdict | UnanswerableInput | None]:
        torch = self.torch
        encoded = [self.tokenizer(t, truncation=False)["input_ids"] for t in texts]
        fits = [i for i, ids in enumerate(encoded) if len(ids) <= self.context]
        verdicts: list[Verdict | UnanswerableInput | None] = [
            None if len(ids) <= self.context else over_window(len(ids), self.context) for ids in encoded]
        if not fits:
            return verdicts
        batch = self.tokenizer.pad({"input_ids": [encoded[i] for i in fits]}, return_tensors="pt")
        with torch.inference_mode():
            logits = self.model(**{k: v.to(self.device) for k, v in batch.items()}).logits.float().cpu()
        for row, i in enumerate(fits):
            verdicts[i] = apply_threshold(self.adapter.verdict(logits[row].tolist(), self.index), self._info.threshold)
        return verdicts
