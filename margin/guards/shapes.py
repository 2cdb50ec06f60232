"""Which cases a guard can take, and what of a case it sees (docs/guards.md#case-shapes).

A case has a target (its last user turn, `prompt`, or its last assistant turn, `response`),
may have turns before it (a conversation), a policy and context. A guard declares which of
these it takes; a run whose cases it cannot take is refused before any call, rather than
sending it half a case. What a guard sees is one of two things: the target text alone (a text
classifier: the rest of the case never reaches it) or the whole case (`margin.types.Exchange`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from margin.errors import InputError
from margin.types import TARGETS, Prompt, Target

Sees = Literal["target text", "whole case"]


@dataclass(frozen=True)
class Shapes:
    targets: tuple[Target, ...] = ("prompt",)
    # takes turns before the judged exchange (the prompt, or the prompt and its response)
    conversation: bool = False
    policy: bool = False  # takes a per-case policy
    context: bool = False  # shows a case's frozen evidence (where its format has a place for it)
    sees: Sees = "target text"
    system: bool = True  # with `conversation`: renders a system turn (Llama Guard's template has none)
    # with `policy`: why a policy text is not in the form the family's format takes (None: it is)
    policy_form: Callable[[str], str | None] | None = field(default=None, compare=False)

    @property
    def whole_cases(self) -> bool:
        return self.sees == "whole case"

    def as_json(self) -> dict[str, Any]:
        return {"targets": list(self.targets), "conversation": self.conversation, "policy": self.policy,
                "sees": self.sees, "system": self.system, "context": self.context}

    def refusal(self, case: Prompt) -> tuple[str, str] | None:
        """(field, reason) when this guard cannot take `case`; None when it can."""
        if case.target not in self.targets:
            return "target", f"judges {' and '.join(self.targets)} targets only, not {case.target}s"
        earlier = case.history if case.target == "prompt" else case.history[:-1]  # before the judged exchange
        if earlier and not self.conversation:
            return "messages", ("renders no turns before the judged prompt and response: it takes a single "
                                "exchange")
        if not self.system and any(turn.role == "system" for turn in case.history):
            return "messages", "renders no system turn (its template takes user and assistant turns only)"
        if case.context and not self.context:
            return "context", "has no place for a case's context in its format (it would judge without it)"
        if case.policy and not self.policy:
            return "policy", "takes no per-case policy (its policy is fixed)"
        malformed = self.policy_form(case.policy) if case.policy and self.policy_form else None
        if malformed:
            return "policy", malformed
        return None


#: A text classifier: judges any target's text alone; a conversation's other turns, a policy or
#: context never reach it, so a case with a policy or context is refused rather than judged without it.
TEXT = Shapes(targets=TARGETS, conversation=True)
#: A model guard whose adapter renders single prompts only, until its card's formats for
#: responses and conversations are written.
PROMPT_ONLY = Shapes()
#: A guard that opted in to whole cases (`margin.types.Exchange`).
WHOLE_CASES = Shapes(targets=TARGETS, conversation=True, policy=True, sees="whole case", context=True)


def check_cases(guard_id: str, shapes: Shapes, cases: tuple[Prompt, ...], source: str,
                lines: dict[str, int] | None) -> None:
    """One InputError for the first case the guard cannot take, naming the file, its line and
    the field (a target no case of the run can be judged at names `--target`)."""
    for case in cases:
        refused = shapes.refusal(case)
        if refused is None:
            continue
        field, reason = refused
        if field == "target":
            raise InputError(f"guard {guard_id} {reason}: pick a guard that takes them (margin guards list "
                             "shows each guard's shapes)", field="--target")
        raise InputError(f"case {case.id!r}: guard {guard_id} {reason}", path=source,
                         line=(lines or {}).get(case.id), field=field)
