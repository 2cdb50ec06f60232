"""gpt-oss-safeguard 20B / 120B (OpenAI).

Template: Harmony chat format through the checkpoint's chat template: the policy is the
system message, the content to classify the user message (OpenAI's card: "system message =
your policy, user message = content to classify"). A lone prompt is sent as it is; a case with
turns before its target, or with context, is written out in the user message as a transcript
(`User:` / `Assistant:` / `System:` turns, a blank line apart, after its context) under a first
line naming the turn to classify, its last user or its last assistant message. The policy is
the case's own where it has one, else `options.policy`, else margin's binary policy for the
target: `margin/guards/data/gpt-oss-safeguard-policy.md` (requests) or
`gpt-oss-safeguard-response-policy.md` (responses). Output:
an analysis (reasoning) channel and a final channel; only the final channel is parsed, and
it must be exactly `0` (safe) or `1` (unsafe), or JSON whose `violation` is 0 or 1. A
missing final channel (reasoning cut off by the token limit) is invalid. Probability
(derived): `1` vs `0` at the first token of the final channel.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources

from margin.backends.generation import Generation, GuardRequest, Step, label_mass, share
from margin.errors import InputError
from margin.guards.adapters.base import INVALID, SingleRequestAdapter, option_choice, option_int
from margin.guards.adapters.preset import Preset
from margin.guards.shapes import Shapes
from margin.types import TARGET_ROLE, TARGETS, Exchange, Target, Verdict

FINAL = "<|channel|>final<|message|>"
ENDS = re.compile(r"<\|(return|end|call)\|>")
HARMONY = re.compile(r"<\|(start|channel|message|end|return)\|>")


SPEAKERS = {"system": "System", "user": "User", "assistant": "Assistant"}


@functools.cache
def default_policy(target: Target = "prompt") -> str:
    name = "gpt-oss-safeguard-policy.md" if target == "prompt" else "gpt-oss-safeguard-response-policy.md"
    return resources.files("margin").joinpath("guards", "data", name).read_text("utf-8")


def content(case: str | Exchange) -> str:
    """The user message: a lone prompt as it is, any other case as a transcript that names
    the turn to classify."""
    if isinstance(case, str):
        return case
    if len(case.messages) == 1 and not case.context:
        return case.text
    judged = f"Classify the last {TARGET_ROLE[case.target]} message of this conversation."
    context = f"Context:\n{case.context}\n\n" if case.context else ""
    turns = "\n\n".join(f"{SPEAKERS[t.role]}: {t.content}" for t in case.messages)
    return f"{judged}\n\n{context}{turns}"


class GptOssSafeguard(SingleRequestAdapter):
    family = "gpt-oss-safeguard"
    options_allowed = frozenset({"policy", "reasoning_effort", "max_new_tokens"})
    labels = "unsafe = final channel 1 (or violation: 1) under the policy"
    # the policy is its system message; a conversation is written out as the content to classify
    shapes = Shapes(targets=TARGETS, conversation=True, policy=True, sees="whole case")

    def __init__(self, variant: str = "", options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(variant, options)
        policy = self.options.get("policy")
        if policy is not None and (not isinstance(policy, str) or not policy.strip()):
            raise InputError("must be the policy text", field="options.policy")
        self.policy: str | None = policy
        self.effort = option_choice(self.options, "reasoning_effort", ("low", "medium", "high"), "low")
        self.max_new_tokens = option_int(self.options, "max_new_tokens", 2048)

    def policy_for(self, case: str | Exchange) -> str:
        """The case's own policy, else the guard's, else margin's for the case's target."""
        if isinstance(case, Exchange) and case.policy:
            return case.policy
        return self.policy or default_policy("prompt" if isinstance(case, str) else case.target)

    def request(self, text: str | Exchange) -> GuardRequest:  # type: ignore[override]
        # The chat template reads the effort from a kwarg; HTTP servers from the request.
        return GuardRequest(
            messages=({"role": "system", "content": self.policy_for(text)}, {"role": "user", "content": content(text)}),
            chat_template_kwargs={"reasoning_effort": self.effort},
            max_new_tokens=self.max_new_tokens,
            keep_special_tokens=True,
            extra={"reasoning_effort": self.effort},
        )

    def parse_one(self, output: Generation) -> Verdict:
        final, steps = final_channel(output)
        if final is None:
            return INVALID
        value = final.strip()
        if value not in ("0", "1"):
            try:
                parsed = json.loads(value)
            except ValueError:
                return INVALID
            violation = parsed.get("violation") if isinstance(parsed, dict) else None
            if violation not in (0, 1) or isinstance(violation, bool):
                return INVALID
            value = str(violation)
        first = next((s for s in steps if s.token.strip()), None)
        p = share(label_mass(first, ("1", "0")), ("1",)) if first else None
        return Verdict("unsafe" if value == "1" else "safe", p)


def final_channel(output: Generation) -> tuple[str | None, tuple[Step, ...]]:
    """The final channel's text and the steps that produced it.

    Raw Harmony text (transformers, vLLM offline with special tokens kept) is split at the
    last final-channel marker; a server that split the channels already returns the final
    channel as the text (its reasoning apart).
    """
    raw = output.raw if output.raw is not None else output.text
    if HARMONY.search(raw):
        start = raw.rfind(FINAL)
        if start < 0:
            return None, ()
        rest = raw[start + len(FINAL):]
        end = ENDS.search(rest)
        if end is None and output.truncated:
            return None, ()
        # Steps after the marker: walk the decoded tokens until they spell it.
        seen, index = "", len(output.steps)
        for i, step in enumerate(output.steps):
            seen += step.token
            if seen.endswith(FINAL):
                index = i + 1
        return (rest[: end.start()] if end else rest), output.steps[index:]
    if output.truncated or not output.text.strip():
        return None, ()
    return output.text, output.steps

#: The families this module defines (margin.guards.adapters.families gathers them).
ADAPTERS = (GptOssSafeguard,)

#: The presets of this family, as `margin guards list` lists them (`margin.guards.presets` gathers
#: every module's).
PRESETS = (
    Preset("gpt-oss-safeguard-20b", "gpt-oss-safeguard", "20b", "openai/gpt-oss-safeguard-20b",
           "gpt-oss-safeguard 20B with margin's binary harm policy"),
    Preset("gpt-oss-safeguard-120b", "gpt-oss-safeguard", "120b", "openai/gpt-oss-safeguard-120b",
           "gpt-oss-safeguard 120B with margin's binary harm policy"),
)
