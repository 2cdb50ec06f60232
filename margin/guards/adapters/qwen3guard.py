"""Qwen3Guard-Gen 0.6B / 4B / 8B (Qwen).

Template: the case's turns through the checkpoint's chat template (a plain prompt: one user
turn), which appends the assistant header itself (the official code passes
add_generation_prompt=False). The turns go as they are: a conversation ending in a user turn
is the card's prompt moderation ("ONLY THE LAST USER's query"), one ending in the assistant's
turn its response moderation ("ONLY THE LAST ASSISTANT's response", the template adding a
refusal policy). Its roles are USER and
ASSISTANT: a system turn, a per-case policy (its categories are fixed) and context have no
place, and are refused (shapes). Output: `Safety: Safe|Unsafe|Controversial` then
`Categories: ...`; a response adds a third line `Refusal: Yes|No`, which a response's output
must carry to be read (the verdict is the Safety line). Controversial is a third class:
unsafe by default (the official evaluation's strict mode), safe with
`controversial: safe` (the tech report's loose mode). Probability (derived): softmax over
the first tokens of Safe / Unsafe / Controversial after `Safety:`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from margin.backends.generation import Generation, GuardRequest, decision_step, label_mass, share
from margin.guards.adapters.base import INVALID, SingleRequestAdapter, chat, option_choice
from margin.guards.adapters.preset import Preset
from margin.guards.shapes import Shapes
from margin.types import TARGETS, Exchange, Verdict, VerdictLabel

SAFETY = re.compile(r"Safety:\s*(Safe|Unsafe|Controversial)")
CATEGORIES = re.compile(r"Categories:.*")
REFUSAL = re.compile(r"Refusal:\s*(Yes|No)")
CLASSES = ("Safe", "Unsafe", "Controversial")


class Qwen3Guard(SingleRequestAdapter):
    family = "qwen3guard-gen"
    options_allowed = frozenset({"controversial"})
    labels = ("unsafe = Safety: Unsafe (and Controversial unless options.controversial = safe), on the user's "
              "query or the assistant's response")
    shapes = Shapes(targets=TARGETS, conversation=True, sees="whole case", system=False)

    def __init__(self, variant: str = "", options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(variant, options)
        self.controversial = option_choice(self.options, "controversial", ("unsafe", "safe"), "unsafe")

    def request(self, text: str | Exchange) -> GuardRequest:  # type: ignore[override]
        return GuardRequest(messages=chat(text), add_generation_prompt=False, max_new_tokens=64)

    def verdict(self, case: str | Exchange, outputs: Sequence[Generation]) -> Verdict:
        response = isinstance(case, Exchange) and case.target == "response"
        return self.parse_one(outputs[0], response=response) if len(outputs) == 1 else INVALID

    def parse_one(self, output: Generation, *, response: bool = False) -> Verdict:
        """The Safety line's verdict; a response's output must also carry its Categories and
        Refusal lines (the card's three-line answer), else it is unreadable."""
        lines = [line.strip() for line in output.text.strip().splitlines()]
        match = SAFETY.fullmatch(lines[0]) if lines else None
        if match is None:
            return INVALID
        if response and not (len(lines) == 3 and CATEGORIES.fullmatch(lines[1]) and REFUSAL.fullmatch(lines[2])):
            return INVALID
        klass = match.group(1)
        label: VerdictLabel = "safe" if klass == "Safe" or (klass == "Controversial" and self.controversial == "safe") else "unsafe"
        unsafe_classes = ("Unsafe", "Controversial") if self.controversial == "unsafe" else ("Unsafe",)
        step = decision_step(output.steps, CLASSES, after="Safety:", prefix=True)
        p = share(label_mass(step, CLASSES, prefix=True), unsafe_classes) if step else None
        return Verdict(label, p)

    def caveats(self) -> tuple[str, ...]:
        return (f"Controversial counted as {self.controversial}",)

#: The families this module defines (margin.guards.adapters.families gathers them).
ADAPTERS = (Qwen3Guard,)

#: The presets of this family, as `margin guards list` lists them (`margin.guards.presets` gathers
#: every module's).
PRESETS = (
    Preset("qwen3guard-gen-0.6b", "qwen3guard-gen", "", "Qwen/Qwen3Guard-Gen-0.6B", "Qwen3Guard-Gen 0.6B"),
    Preset("qwen3guard-gen-4b", "qwen3guard-gen", "", "Qwen/Qwen3Guard-Gen-4B", "Qwen3Guard-Gen 4B"),
    Preset("qwen3guard-gen-8b", "qwen3guard-gen", "", "Qwen/Qwen3Guard-Gen-8B", "Qwen3Guard-Gen 8B"),
)
