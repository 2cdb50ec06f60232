"""What a judge sees and what it decides."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from margin.types import Behaviour

JudgeStatus = Literal["preserved", "changed", "unparseable"]
BEHAVIOURS: tuple[Behaviour, ...] = ("complies", "refuses", "other")

Messages = list[dict[str, str]]


@dataclass(frozen=True, slots=True)
class JudgeCase:
    """One prompt under one transformation: the two prompts and the model's two responses."""

    original_prompt: str
    original_response: str
    transformed_prompt: str
    transformed_response: str


@dataclass(frozen=True, slots=True)
class JudgeVerdict:
    """A completed judge output. `unparseable` output counts as not preserved; `rationale`
    then says why it could not be read."""

    status: JudgeStatus
    rationale: str
    original_behaviour: Behaviour | None = None
    transformed_behaviour: Behaviour | None = None
    same_request: bool | None = None
    raw: str = ""

    @property
    def preserved(self) -> bool:
        return self.status == "preserved"


class Judge(Protocol):
    """A judge renders a case into chat messages and reads the model's answer strictly."""

    @property
    def id(self) -> str: ...

    def identity(self) -> dict[str, Any]:
        """Everything that can change a verdict (template text, parse rule, model)."""
        ...

    def messages(self, case: JudgeCase) -> Messages: ...

    def parse(self, output: str) -> JudgeVerdict: ...
