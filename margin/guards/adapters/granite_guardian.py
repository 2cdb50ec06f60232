"""Granite Guardian 3.0-3.2 and 3.3 (IBM).

Template: the checkpoint's chat template with `guardian_config` (3.0-3.2: `risk_name`;
3.3: `criteria_id`, plus `think`). Output: 3.0-3.2 start with `Yes` / `No` (3.2 adds a
confidence tag); 3.3 gives `<score> yes|no </score>`, after a `<think>` block in think mode.
`Yes` means the risk is present: unsafe. Probability: 3.0-3.2 use IBM's rule (yes / no mass
summed over every generated step); 3.3 reads the step after `<score>` only, so words in the
reasoning do not count.

Cases (IBM's cookbooks): a prompt is one user turn; a response is the user turn and the
assistant turn, and the template judges the assistant message against the risk's response
definition. A case's own policy is its risk definition: 3.0-3.2 `{"risk_name": "case_policy",
"risk_definition": ...}` (a name outside the risk bank, as bring-your-own-risk needs),
3.3 `{"custom_criteria": ...}`. 3.0-3.2's templates read the last exchange only and place a
`context` turn only in place of the user prompt (groundedness) or as the judged turn (context
relevance), so they take single exchanges without context. 3.3's template renders the whole
conversation and takes evidence as `documents`, so a case's context goes there, one document.
"""

from __future__ import annotations

import math
import re

from margin.backends.generation import (
    Generation,
    GuardRequest,
    decision_step,
    label_mass,
    norm,
    share,
)
from margin.errors import InputError
from margin.guards.adapters.base import INVALID, SingleRequestAdapter, chat, option_bool
from margin.guards.adapters.preset import Preset
from margin.guards.shapes import Shapes
from margin.types import TARGETS, Exchange, Verdict

FIRST_WORD = re.compile(r"\w+")
SCORE = re.compile(r"<score>\s*(.*?)\s*</score>", re.DOTALL)
THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
VARIANTS = ("3.0", "3.1", "3.2", "3.3")
#: 3.0-3.2: one prompt, or one prompt and its response, with a risk definition per case.
SINGLE_EXCHANGE = Shapes(targets=TARGETS, policy=True, sees="whole case")
#: 3.3: a conversation, with criteria and a document per case; its template has a judge system
#: turn of its own and no place for the case's.
CONVERSATION = Shapes(targets=TARGETS, conversation=True, policy=True, sees="whole case", system=False,
                      context=True)
# The name a case's own risk definition goes under on 3.0-3.2 (one not in the risk bank).
CASE_RISK = "case_policy"


class GraniteGuardian(SingleRequestAdapter):
    family = "granite-guardian"
    options_allowed = frozenset({"risk", "think"})
    labels = ("unsafe = the risk (default `harm`, or the case's own definition) is detected in the user prompt, "
              "or in the assistant's response")
    shapes = SINGLE_EXCHANGE

    @classmethod
    def shapes_for(cls, variant: str) -> Shapes:
        return CONVERSATION if variant == "3.3" else SINGLE_EXCHANGE

    def __init__(self, variant: str = "3.3", options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(variant, options)
        if variant not in VARIANTS:
            raise InputError(f"unknown Granite Guardian version {variant!r}; expected one of {', '.join(VARIANTS)}",
                             field="family")
        self.risk = self.options.get("risk", "harm")
        if not isinstance(self.risk, str) or not self.risk:
            raise InputError("must be a risk name such as harm, jailbreak, violence", field="options.risk")
        self.think = option_bool(self.options, "think", False)
        if self.think and variant != "3.3":
            raise InputError("think mode exists from Granite Guardian 3.3 on", field="options.think")

    def request(self, text: str | Exchange) -> GuardRequest:  # type: ignore[override]
        policy, context = ("", "") if isinstance(text, str) else (text.policy, text.context)
        kwargs: dict[str, object]
        if self.variant == "3.3":
            config = {"custom_criteria": policy} if policy else {"criteria_id": self.risk}
            kwargs = {"guardian_config": config, "think": self.think}
            if context:
                kwargs["documents"] = [{"doc_id": "0", "text": context}]
            tokens = 2048 if self.think else 20
        else:
            config = {"risk_name": CASE_RISK, "risk_definition": policy} if policy else {"risk_name": self.risk}
            kwargs = {"guardian_config": config}
            tokens = 20 if self.variant == "3.2" else 5
        return GuardRequest(messages=chat(text), chat_template_kwargs=kwargs, max_new_tokens=tokens)

    def parse_one(self, output: Generation) -> Verdict:
        if self.variant == "3.3":
            return parse_score(output)
        return parse_first_word(output)


def parse_first_word(output: Generation) -> Verdict:
    match = FIRST_WORD.search(output.text.strip())
    word = match.group().lower() if match else ""
    if word not in ("yes", "no"):
        return INVALID
    # IBM's softmax_yes_no: probability mass of yes / no tokens over all steps.
    yes = no = 1e-50
    for step in output.steps:
        for token, logprob in step.top:
            t = norm(token)
            if t == "yes":
                yes += math.exp(logprob)
            elif t == "no":
                no += math.exp(logprob)
    p = yes / (yes + no) if output.steps else None
    return Verdict("unsafe" if word == "yes" else "safe", p)


def parse_score(output: Generation) -> Verdict:
    text = output.text
    if "<think>" in text and "</think>" not in text:
        return INVALID  # reasoning cut off before the verdict
    scores = SCORE.findall(THINK.sub("", text))
    if len(scores) != 1 or scores[0].lower() not in ("yes", "no"):
        return INVALID
    step = decision_step(output.steps, ("yes", "no"), after=_after_reasoning(output))
    p = share(label_mass(step, ("yes", "no")), ("yes",)) if step else None
    return Verdict("unsafe" if scores[0].lower() == "yes" else "safe", p)


def _after_reasoning(output: Generation) -> str:
    # The decision token follows `<score>`; with a think block, the first one after it.
    return "</think>" if "</think>" in output.text else "<score>"

#: The families this module defines (margin.guards.adapters.families gathers them).
ADAPTERS = (GraniteGuardian,)

#: The presets of this family, as `margin guards list` lists them (`margin.guards.presets` gathers
#: every module's).
PRESETS = (
    Preset("granite-guardian-3.0-2b", "granite-guardian", "3.0", "ibm-granite/granite-guardian-3.0-2b",
           "Granite Guardian 3.0 2B (IBM)"),
    Preset("granite-guardian-3.0-8b", "granite-guardian", "3.0", "ibm-granite/granite-guardian-3.0-8b",
           "Granite Guardian 3.0 8B (IBM)"),
    Preset("granite-guardian-3.1-2b", "granite-guardian", "3.1", "ibm-granite/granite-guardian-3.1-2b",
           "Granite Guardian 3.1 2B (IBM)", revision="81145486e85c6c82c01e759c0356d9d6da4d21a5"),
    Preset("granite-guardian-3.1-8b", "granite-guardian", "3.1", "ibm-granite/granite-guardian-3.1-8b",
           "Granite Guardian 3.1 8B (IBM)"),
    Preset("granite-guardian-3.2-3b-a800m", "granite-guardian", "3.2", "ibm-granite/granite-guardian-3.2-3b-a800m",
           "Granite Guardian 3.2 3B-A800M MoE (IBM)", revision="3de033d89b499a18d9a573b5192bf3b967ef48c5"),
    Preset("granite-guardian-3.2-5b", "granite-guardian", "3.2", "ibm-granite/granite-guardian-3.2-5b",
           "Granite Guardian 3.2 5B (IBM)"),
    Preset("granite-guardian-3.3-8b", "granite-guardian", "3.3", "ibm-granite/granite-guardian-3.3-8b",
           "Granite Guardian 3.3 8B, no think (IBM)", options={"think": False}),
    Preset("granite-guardian-3.3-8b-think", "granite-guardian", "3.3", "ibm-granite/granite-guardian-3.3-8b",
           "Granite Guardian 3.3 8B, think mode (IBM)", options={"think": True}),
)
