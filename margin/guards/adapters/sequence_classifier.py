"""Sequence classifiers: Llama Prompt Guard 2 (Meta) and ProtectAI's DeBERTa v3 injection model.

These detect prompt attacks (injection, jailbreak), not harmful content: a harmful request
written plainly is `safe` to them. Input: the raw text, no template, at most 512 tokens.
p_unsafe is the softmax probability of the attack class (Prompt Guard 2: index 1, whose
published label name is generic; ProtectAI: the label named INJECTION).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import ClassVar

from margin.errors import InputError
from margin.guards.adapters.preset import Preset
from margin.guards.base import EVEN_ODDS
from margin.guards.shapes import PROMPT_ONLY, Shapes
from margin.types import Verdict
from margin.util.hashing import canonical_json

ATTACK_CAVEAT = ("detects prompt attacks (injection / jailbreak), not harmful content: "
                 "unsafe means 'attack', so its margins answer a different question than harm guards'")


class SequenceClassifier:
    family: ClassVar[str] = "sequence-classifier"
    labels: ClassVar[str] = "unsafe = P(attack class) >= threshold (prompt attack, not harm)"
    context_tokens: ClassVar[int] = 512
    #: the prompt alone
    shapes: ClassVar[Shapes] = PROMPT_ONLY

    def __init__(self, variant: str, options: Mapping[str, object] | None = None) -> None:
        if variant not in ("prompt-guard-2", "protectai"):
            raise InputError(f"unknown classifier {variant!r}", field="family")
        if options:
            raise InputError("sequence classifiers take no options", field=f"options.{sorted(options)[0]}")
        self.variant = variant
        self.options: dict[str, object] = {}

    def attack_index(self, id2label: Mapping[int, str]) -> int:
        """Which logit is the attack class; checked against the checkpoint's config."""
        if self.variant == "prompt-guard-2":
            if len(id2label) != 2:
                raise ValueError(f"Prompt Guard 2 has 2 labels, this checkpoint has {len(id2label)}")
            return 1  # keyed by index: the published names are generic (LABEL_0 / LABEL_1)
        names = {str(v).upper(): int(k) for k, v in id2label.items()}
        if "INJECTION" not in names:
            raise ValueError(f"expected an INJECTION label, found {sorted(names)}")
        return names["INJECTION"]

    def verdict(self, logits: Sequence[float], index: int) -> Verdict:
        """Its own verdict: the attack class at even odds (the guard applies a threshold on top)."""
        top = max(logits)
        exps = [math.exp(x - top) for x in logits]
        p = exps[index] / sum(exps)
        if math.isnan(p):
            return Verdict("invalid", raw=canonical_json({"logits": list(logits)}))
        raw = canonical_json({"p_attack": round(p, 6), "logits": [round(x, 6) for x in logits]})
        return Verdict("unsafe" if p >= EVEN_ODDS else "safe", p, raw)

    def template(self) -> str:
        return canonical_json({"family": self.family, "variant": self.variant, "input": "{prompt}",
                               "context_tokens": self.context_tokens, "truncation": False})

    def params(self) -> dict[str, str]:
        return {}

    def caveats(self) -> tuple[str, ...]:
        return (ATTACK_CAVEAT,)

#: The families this module defines (margin.guards.adapters.families gathers them).
ADAPTERS = (SequenceClassifier,)

#: The presets of this family, as `margin guards list` lists them (`margin.guards.presets` gathers
#: every module's).
PRESETS = (
    Preset("prompt-guard-2-86m", "sequence-classifier", "prompt-guard-2", "meta-llama/Llama-Prompt-Guard-2-86M",
           "Llama Prompt Guard 2 86M: prompt-attack detector (Meta)", backends=("transformers",),
           revision="a8ded8e697ce7c355e395a0df51f94adb4a2fd27"),
    Preset("prompt-guard-2-22m", "sequence-classifier", "prompt-guard-2", "meta-llama/Llama-Prompt-Guard-2-22M",
           "Llama Prompt Guard 2 22M: prompt-attack detector (Meta)", backends=("transformers",),
           revision="11614a155199674a0a95e6602d6ab0417b790ed0"),
    Preset("protectai-prompt-injection-v2", "sequence-classifier", "protectai",
           "protectai/deberta-v3-base-prompt-injection-v2",
           "ProtectAI DeBERTa v3 prompt-injection detector v2", backends=("transformers",),
           revision="90c9989b1a342275dd0d1a95aad283c04e075671"),
)
