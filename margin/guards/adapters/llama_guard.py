"""Llama Guard 3 (1B, 8B) and 4 (Meta).

Template: the conversation through the checkpoint's chat template (3-1B and 4 take
list-of-parts content; `options.content: text` sends a plain string instead, for a served
template that cannot take parts): a prompt is one user turn; a case's turns go as they are,
and the template judges the last one's role, `User` for a prompt target and `Agent` for a
response (Meta's card: "Check if there is unsafe content in 'Agent' messages ... ONLY THE LAST
Agent message"). The template takes no system turn, so a case with one is refused. A case's
policy is its list of categories, one `S<n>: <description>` a line (a line that starts no code
goes on the description before it), exactly as the template writes its categories block; it
replaces the default categories through the template's `categories` kwarg (the 3-1B card's
"provide your own categories"; 3-1B and 4), and 3-8B, whose template hard-codes the list, refuses
it. Output: `safe`, or `unsafe` then a line of S-codes; 3-8B and 4
usually emit a blank line first. Probability (Meta's card): the first generated `safe` /
`unsafe` token, two-way softmax.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from margin.backends.generation import Generation, GuardRequest, decision_step, label_mass, share
from margin.errors import InputError
from margin.guards.adapters.base import INVALID, SingleRequestAdapter, chat, option_choice
from margin.guards.adapters.preset import Preset
from margin.guards.shapes import Shapes
from margin.types import TARGETS, Exchange, Verdict, VerdictLabel

CATEGORY = re.compile(r"S\d{1,2}")
CATEGORY_LINE = re.compile(r"(S\d{1,2}): (.*)")
VARIANTS = ("3-1b", "3-8b", "4")


def categories_of(policy: str) -> dict[str, str] | str:
    """A policy's categories, code -> description, in order (the template writes each back as
    `code: description`); or why the policy is not such a list."""
    found: dict[str, str] = {}
    code = None
    for n, line in enumerate(policy.strip("\n").split("\n"), start=1):
        start = CATEGORY_LINE.fullmatch(line)
        if start is None:
            if code is None:
                return f"Llama Guard's policy is its categories, `S1: <description>` a line; line {n} starts no code"
            found[code] += "\n" + line
            continue
        code = start.group(1)
        if code in found:
            return f"Llama Guard's policy names category {code} twice"
        found[code] = start.group(2)
    if not found or not all(d.strip() for d in found.values()):
        return "Llama Guard's policy needs at least one category, each with a description"
    return found


def policy_form(policy: str) -> str | None:
    found = categories_of(policy)
    return found if isinstance(found, str) else None


class LlamaGuard(SingleRequestAdapter):
    family = "llama-guard"
    options_allowed = frozenset({"excluded_category_keys", "content"})
    labels = "unsafe = the judged turn (the user prompt, or the agent's response) violates the S1-S14 hazard taxonomy"
    shapes = Shapes(targets=TARGETS, conversation=True, policy=True, sees="whole case", system=False,
                    policy_form=policy_form)

    @classmethod
    def shapes_for(cls, variant: str) -> Shapes:
        # 3-8B's template hard-codes its categories: it takes no per-case list
        return replace(cls.shapes, policy=False) if variant == "3-8b" else cls.shapes

    def __init__(self, variant: str = "4", options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(variant, options)
        if variant not in VARIANTS:
            raise InputError(f"unknown Llama Guard variant {variant!r}", field="family")
        self.shapes = self.shapes_for(variant)  # type: ignore[misc]
        default = "text" if variant == "3-8b" else "parts"
        self.parts = option_choice(self.options, "content", ("parts", "text"), default) == "parts"
        excluded = self.options.get("excluded_category_keys")
        if excluded is not None:
            if variant == "3-8b":
                raise InputError("Llama Guard 3-8B's template takes no category kwargs",
                                 field="options.excluded_category_keys")
            if not isinstance(excluded, list) or not all(isinstance(k, str) and CATEGORY.fullmatch(k) for k in excluded):
                raise InputError("must be a list like [S6, S7]", field="options.excluded_category_keys")

    def request(self, text: str | Exchange) -> GuardRequest:  # type: ignore[override]
        kwargs: dict[str, Any] = {}
        if "excluded_category_keys" in self.options:
            kwargs["excluded_category_keys"] = list(self.options["excluded_category_keys"])
        if isinstance(text, Exchange) and text.policy:
            found = categories_of(text.policy)
            if isinstance(found, str) or self.variant == "3-8b":  # refused before any call (shapes)
                raise InputError(found if isinstance(found, str) else "3-8B takes no categories", field="policy")
            kwargs["categories"] = found
        return GuardRequest(messages=chat(text, parts=self.parts),
                            chat_template_kwargs=kwargs, max_new_tokens=20)

    def parse_one(self, output: Generation) -> Verdict:
        label = parse_text(output.text)
        if label is None:
            return INVALID
        step = decision_step(output.steps, ("safe", "unsafe"))
        p = share(label_mass(step, ("safe", "unsafe")), ("unsafe",)) if step else None
        return Verdict(label, p)


def parse_text(text: str) -> VerdictLabel | None:
    """`safe` / `unsafe` from the first line (case-insensitive, surrounding blank lines
    allowed); None for anything else. A missing category line keeps `unsafe`."""
    lines = text.strip().splitlines()
    if not lines:
        return None
    first = lines[0].strip().lower()
    return "safe" if first == "safe" else "unsafe" if first == "unsafe" else None


def categories(text: str) -> list[str]:
    lines = text.strip().splitlines()
    return CATEGORY.findall(lines[1]) if len(lines) > 1 else []

#: The families this module defines (margin.guards.adapters.families gathers them).
ADAPTERS = (LlamaGuard,)

#: The presets of this family, as `margin guards list` lists them (`margin.guards.presets` gathers
#: every module's).
PRESETS = (
    Preset("llama-guard-3-1b", "llama-guard", "3-1b", "meta-llama/Llama-Guard-3-1B", "Llama Guard 3 1B (Meta)",
           revision="acf7aafa60f0410f8f42b1fa35e077d705892029"),
    Preset("llama-guard-3-8b", "llama-guard", "3-8b", "meta-llama/Llama-Guard-3-8B", "Llama Guard 3 8B (Meta)"),
    Preset("llama-guard-4", "llama-guard", "4", "meta-llama/Llama-Guard-4-12B", "Llama Guard 4 12B (Meta)",
           auto_class="image-text-to-text"),
)
