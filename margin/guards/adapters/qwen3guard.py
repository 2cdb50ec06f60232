"""Qwen3Guard-Gen 0.6B / 4B / 8B (Qwen).

Template: one user turn through the checkpoint's chat template, which appends the assistant
header itself (the official code passes add_generation_prompt=False). Output:
`Safety: Safe|Unsafe|Controversial` then `Categories: ...`. Controversial is a third class:
unsafe by default (the official evaluation's strict mode), safe with
`controversial: safe` (the tech report's loose mode). Probability (derived): softmax over
the first tokens of Safe / Unsafe / Controversial after `Safety:`.
"""

from __future__ import annotations

import re

from margin.backends.generation import Generation, GuardRequest, decision_step, label_mass, share
from margin.guards.adapters.base import INVALID, SingleRequestAdapter, option_choice, user
from margin.types import Verdict, VerdictLabel

SAFETY = re.compile(r"Safety:\s*(Safe|Unsafe|Controversial)")
CLASSES = ("Safe", "Unsafe", "Controversial")


class Qwen3Guard(SingleRequestAdapter):
    family = "qwen3guard-gen"
    options_allowed = frozenset({"controversial"})
    labels = "unsafe = Safety: Unsafe (and Controversial unless options.controversial = safe)"

    def __init__(self, variant: str = "", options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(variant, options)
        self.controversial = option_choice(self.options, "controversial", ("unsafe", "safe"), "unsafe")

    def request(self, text: str) -> GuardRequest:
        return GuardRequest(messages=user(text), add_generation_prompt=False, max_new_tokens=64)

    def parse_one(self, output: Generation) -> Verdict:
        lines = [line.strip() for line in output.text.strip().splitlines()]
        match = SAFETY.fullmatch(lines[0]) if lines else None
        if match is None:
            return INVALID
        klass = match.group(1)
        label: VerdictLabel = "safe" if klass == "Safe" or (klass == "Controversial" and self.controversial == "safe") else "unsafe"
        unsafe_classes = ("Unsafe", "Controversial") if self.controversial == "unsafe" else ("Unsafe",)
        step = decision_step(output.steps, CLASSES, after="Safety:", prefix=True)
        p = share(label_mass(step, CLASSES, prefix=True), unsafe_classes) if step else None
        return Verdict(label, p)

    def caveats(self) -> tuple[str, ...]:
        return (f"Controversial counted as {self.controversial}",)
