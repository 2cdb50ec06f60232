"""A study's guard stacks: each entry of `guards:` as an input guard, an output guard, or both
(docs/study.md#guard-stacks-input-and-output-guards)."""

from __future__ import annotations

from dataclasses import dataclass

from margin.guards.shapes import TEXT, Shapes
from margin.guards.spec import GuardSpec
from margin.reports.pairings import Entity
from margin.runrecord import info_record
from margin.types import GuardInfo


@dataclass(frozen=True)
class GuardPlan:
    """One guard of a stack: how to reach it, who it is, and the cases it takes."""

    spec: GuardSpec
    info: GuardInfo
    shapes: Shapes = TEXT

    @property
    def id(self) -> str:
        return self.info.id


@dataclass(frozen=True)
class StackPlan:
    """One entry of `guards:`: an input guard (judging the prompt), an output guard (judging
    the protected model's response), or both; a bypass of the stack passes each it has.

    Its id is the input guard's when it has no output guard (as before output guards, so
    such a study keeps its bytes), else `INPUT+out:OUTPUT` or `out:OUTPUT`."""

    input: GuardPlan | None
    output: GuardPlan | None
    name: str | None = None
    creator: str | None = None

    @property
    def id(self) -> str:
        if self.output is None:
            assert self.input is not None
            return self.input.id
        return ("" if self.input is None else f"{self.input.id}+") + f"out:{self.output.id}"

    def record(self) -> Entity:
        """The stack as the pairings' meta.guards and study.json list it: an input guard alone
        flat, as it always was; a stack with an output guard with each layer's identity."""
        head = {"id": self.id, "name": self.name or self.id, "creator": self.creator}
        if self.output is None:
            assert self.input is not None
            return Entity.model_validate({**head, **{k: v for k, v in info_record(self.input.info).items() if k != "id"}})
        layers = {"input": info_record(self.input.info)} if self.input is not None else {}
        return Entity.model_validate({**head, **layers, "output": info_record(self.output.info)})
