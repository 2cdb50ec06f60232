"""The adapter interface: how a family turns a text into requests and outputs into a verdict.

An adapter never touches a model or a network: backends do. `parse` must return `invalid`
for any output it cannot read (never safe, never unsafe) and may give `p_unsafe` from the
logprobs of the decision token; the guard applies the threshold.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from margin.backends.generation import Generation, GuardRequest
from margin.errors import InputError
from margin.guards.shapes import PROMPT_ONLY, Shapes
from margin.types import Exchange, Verdict
from margin.util.hashing import canonical_json

INVALID = Verdict("invalid")


class Adapter(ABC):
    family: ClassVar[str]
    #: Family options a spec may set (anything else is an input error).
    options_allowed: ClassVar[frozenset[str]] = frozenset()
    #: What `unsafe` means for this family, for `margin guards list`.
    labels: ClassVar[str] = "unsafe = harmful user prompt"
    #: The cases its template renders (`margin guards list`): single prompts until the card's
    #: response and conversation formats are written for the family.
    shapes: ClassVar[Shapes] = PROMPT_ONLY

    @classmethod
    def shapes_for(cls, variant: str) -> Shapes:
        """The cases `variant`'s template renders (for most families every variant's alike)."""
        return cls.shapes

    def __init__(self, variant: str = "", options: Mapping[str, Any] | None = None) -> None:
        self.variant = variant
        self.options = dict(options or {})
        unknown = sorted(set(self.options) - self.options_allowed)
        if unknown:
            allowed = ", ".join(sorted(self.options_allowed)) or "none"
            raise InputError(f"unknown option for {self.family}; allowed: {allowed}", field=f"options.{unknown[0]}")

    @abstractmethod
    def requests(self, text: str) -> list[GuardRequest]:
        """The model calls one text needs (one, except multi-policy families)."""

    @abstractmethod
    def parse(self, outputs: Sequence[Generation]) -> Verdict:
        """A verdict from the outputs of `requests(text)`, in order; raw is filled by the guard."""

    def verdict(self, case: str | Exchange, outputs: Sequence[Generation]) -> Verdict:
        """The verdict on `case` (what `requests` was given): `parse`, unless a family reads a
        response's verdict from another part of its output."""
        return self.parse(outputs)

    def template(self) -> str:
        """A canonical description of what is sent, with `{prompt}` for the text: its
        SHA-256 goes into the snapshot. A checkpoint's own chat template is pinned by the
        checkpoint revision, so it is named, not copied."""
        return canonical_json({"family": self.family, "variant": self.variant,
                               "requests": [describe(r) for r in self.requests("{prompt}")]})

    def params(self) -> dict[str, str]:
        """Settings that change verdicts, recorded in GuardInfo.params."""
        return {f"option.{k}": v if isinstance(v, str) else canonical_json(v) for k, v in sorted(self.options.items())}

    def caveats(self) -> tuple[str, ...]:
        return ()


def describe(request: GuardRequest) -> dict[str, Any]:
    if request.prompt is not None:
        return {"raw_prompt": request.prompt, "max_new_tokens": request.max_new_tokens}
    return {
        "messages": list(request.messages or ()),
        "chat_template": "the checkpoint's own, at the pinned revision",
        "chat_template_kwargs": request.chat_template_kwargs,
        "add_generation_prompt": request.add_generation_prompt,
        "max_new_tokens": request.max_new_tokens,
        **({"request": request.extra} if request.extra else {}),
    }


class SingleRequestAdapter(Adapter):
    """The common case: one request per text."""

    @abstractmethod
    def request(self, text: str) -> GuardRequest: ...

    @abstractmethod
    def parse_one(self, output: Generation) -> Verdict: ...

    def requests(self, text: str) -> list[GuardRequest]:
        return [self.request(text)]

    def parse(self, outputs: Sequence[Generation]) -> Verdict:
        if len(outputs) != 1:
            return INVALID
        return self.parse_one(outputs[0])


def user(text: str, *, parts: bool = False) -> tuple[dict[str, Any], ...]:
    """A single user turn; `parts` gives list-of-parts content (Llama Guard 3-1B and 4)."""
    return (turn("user", text, parts=parts),)


def turn(role: str, text: str, *, parts: bool = False) -> dict[str, Any]:
    content: Any = [{"type": "text", "text": text}] if parts else text
    return {"role": role, "content": content}


def chat(case: str | Exchange, *, parts: bool = False) -> tuple[dict[str, Any], ...]:
    """A text as a single user turn, or a whole case's conversation turn by turn, as sent to a
    checkpoint's chat template (which renders each role its card's way)."""
    if isinstance(case, str):
        return user(case, parts=parts)
    return tuple(turn(t.role, t.content, parts=parts) for t in case.messages)


def option_bool(options: Mapping[str, Any], name: str, default: bool) -> bool:
    value = options.get(name, default)
    if not isinstance(value, bool):
        raise InputError("must be true or false", field=f"options.{name}")
    return value


def option_choice(options: Mapping[str, Any], name: str, choices: Sequence[str], default: str) -> str:
    value = options.get(name, default)
    if value not in choices:
        raise InputError(f"must be one of {', '.join(choices)}", field=f"options.{name}")
    return str(value)


def option_int(options: Mapping[str, Any], name: str, default: int) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError("must be a positive integer", field=f"options.{name}")
    return value
