"""The LLM judge: a template, the strict parse rule, and the identity of the model that answers.

`LLMJudge` never calls a model itself: `messages` gives what to send, `parse` reads what came
back. `judge` runs cases through any `complete` function (messages -> text, or None for no
output), for use outside a study; a study sends the same messages through its model actors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from margin.judges.parse import parse_verdict
from margin.judges.template import JudgeTemplate
from margin.judges.verdicts import JudgeCase, JudgeVerdict, Messages
from margin.util.hashing import canonical_json, sha256_text


class LLMJudge:
    def __init__(self, template: JudgeTemplate, model: Mapping[str, Any], judge_id: str | None = None) -> None:
        """`model` is the answering model's identity (whatever decides its outputs)."""
        self.template = template
        self.model = dict(model)
        digest = sha256_text(canonical_json({"template": template.sha256, "model": self.model}))[:8]
        self._id = judge_id or f"{template.name}~{digest}"

    @property
    def id(self) -> str:
        return self._id

    def identity(self) -> dict[str, Any]:
        return {"id": self._id, "template": self.template.describe(), "model": self.model}

    def messages(self, case: JudgeCase) -> Messages:
        return self.template.render(case)

    def parse(self, output: str) -> JudgeVerdict:
        return parse_verdict(output)

    def judge(self, cases: Sequence[JudgeCase],
              complete: Callable[[list[Messages]], Sequence[str | None]]) -> list[JudgeVerdict | None]:
        """None where the model gave no output (missing: never scored, never `changed`)."""
        outputs = complete([self.messages(c) for c in cases])
        return [None if out is None else self.parse(out) for out in outputs]
