"""gpt-oss-safeguard 20B / 120B (OpenAI).

Template: Harmony chat format through the checkpoint's chat template: the policy is the
system message, the text to classify the user message. margin ships its own binary policy
(`margin/guards/data/gpt-oss-safeguard-policy.md`; `options.policy` replaces it). Output:
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
from margin.types import Verdict

FINAL = "<|channel|>final<|message|>"
ENDS = re.compile(r"<\|(return|end|call)\|>")
HARMONY = re.compile(r"<\|(start|channel|message|end|return)\|>")


@functools.cache
def default_policy() -> str:
    return resources.files("margin").joinpath("guards", "data", "gpt-oss-safeguard-policy.md").read_text("utf-8")


class GptOssSafeguard(SingleRequestAdapter):
    family = "gpt-oss-safeguard"
    options_allowed = frozenset({"policy", "reasoning_effort", "max_new_tokens"})
    labels = "unsafe = final channel 1 (or violation: 1) under the policy"

    def __init__(self, variant: str = "", options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(variant, options)
        policy = self.options.get("policy", default_policy())
        if not isinstance(policy, str) or not policy.strip():
            raise InputError("must be the policy text", field="options.policy")
        self.policy = policy
        self.effort = option_choice(self.options, "reasoning_effort", ("low", "medium", "high"), "low")
        self.max_new_tokens = option_int(self.options, "max_new_tokens", 2048)

    def request(self, text: str) -> GuardRequest:
        # The chat template reads the effort from a kwarg; HTTP servers from the request.
        return GuardRequest(
            messages=({"role": "system", "content": self.policy}, {"role": "user", "content": text}),
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
