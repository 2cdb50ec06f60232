"""`prompted`: any instruct model as a guard, told a policy and read by a label rule.

Template: the policy is the system message and the text the user message (`options.user`
may frame it: a string holding `{text}` once), through the model's own chat template (a
server applies it; its SHA-256 is among the server's facts). Output: the label rule reads
the reply:

- words (default): the whole reply, without surrounding whitespace, quotes and a final
  `.`, compared casefolded, must be one of `options.labels.unsafe` or `.safe` (default
  `unsafe` / `safe`);
- `options.pattern`, a regex: its first match in the reply; the group named `label` (else
  group 1, else the whole match) must be one of those words.

Anything else is invalid. Constrained decoding (a grammar, a JSON schema) is the server's:
give it as the guard file's `request_options`. Probability (derived): at the step where the
matched label begins, the mass of the unsafe words against the safe words (a candidate
counts for a word it is a prefix of, the first piece of a multi-token word), and only
when both sides are among the step's top logprobs (item 1's rule: an absent label is
unknown, not zero).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from margin.backends.generation import Generation, GuardRequest, Step, norm
from margin.errors import InputError
from margin.guards.adapters.base import INVALID, SingleRequestAdapter, option_int
from margin.types import Verdict, VerdictLabel

TEXT = "{text}"


def _words(value: object, field: str) -> tuple[str, ...]:
    words = (value,) if isinstance(value, str | int) and not isinstance(value, bool) else value
    if not isinstance(words, list | tuple) or not words or not all(
            isinstance(w, str | int) and not isinstance(w, bool) and norm(str(w)) for w in words):
        raise InputError("must be a word or a list of words", field=field)
    return tuple(str(w) for w in words)


class Prompted(SingleRequestAdapter):
    family = "prompted"
    options_allowed = frozenset({"policy", "labels", "pattern", "user", "max_new_tokens"})
    labels = "unsafe = the reply is one of options.labels.unsafe (a word, or a regex's match) under the policy"

    def __init__(self, variant: str = "", options=None) -> None:  # type: ignore[no-untyped-def]
        super().__init__(variant, options)
        policy = self.options.get("policy")
        if not isinstance(policy, str) or not policy.strip():
            raise InputError("the prompted guard needs its policy: the text the model is told (a string)",
                             field="options.policy")
        self.policy = policy
        labels = self.options.get("labels", {"unsafe": "unsafe", "safe": "safe"})
        if not isinstance(labels, dict) or set(labels) != {"unsafe", "safe"}:
            raise InputError("must be a mapping with exactly unsafe and safe", field="options.labels")
        self.unsafe = _words(labels["unsafe"], "options.labels.unsafe")
        self.safe = _words(labels["safe"], "options.labels.safe")
        both = {norm(w) for w in self.unsafe} & {norm(w) for w in self.safe}
        if both:
            raise InputError(f"{sorted(both)[0]!r} is both an unsafe and a safe label", field="options.labels")
        pattern = self.options.get("pattern")
        try:
            self.pattern = re.compile(pattern) if pattern is not None else None
        except (re.error, TypeError) as exc:
            raise InputError(f"not a regular expression: {exc}", field="options.pattern") from None
        self.user = self.options.get("user", TEXT)
        if not isinstance(self.user, str) or self.user.count(TEXT) != 1:
            raise InputError("must be a string holding {text} exactly once", field="options.user")
        self.max_new_tokens = option_int(self.options, "max_new_tokens", 8)

    def request(self, text: str) -> GuardRequest:
        # Plain-string content and no server-specific field: any chat server takes it.
        before, after = self.user.split(TEXT)
        return GuardRequest(messages=({"role": "system", "content": self.policy},
                                      {"role": "user", "content": before + text + after}),
                            max_new_tokens=self.max_new_tokens)

    def label_span(self, reply: str) -> tuple[str, int] | None:
        """The label the rule reads in `reply` and where it starts, or None."""
        if self.pattern is None:
            core = reply.strip()
            start = reply.find(core)
            core = core.strip('"\'').rstrip(".").strip('"\'').strip()
            return (core, reply.find(core, start)) if core else None
        match = self.pattern.search(reply)
        if match is None:
            return None
        group = "label" if "label" in self.pattern.groupindex else (1 if self.pattern.groups else 0)
        found = match.group(group)
        return (found, match.start(group)) if found else None

    def parse_one(self, output: Generation) -> Verdict:
        span = self.label_span(output.text)
        if span is None:
            return INVALID
        word = norm(span[0])
        label: VerdictLabel
        if word in {norm(w) for w in self.unsafe}:
            label = "unsafe"
        elif word in {norm(w) for w in self.safe}:
            label = "safe"
        else:
            return INVALID
        step = step_at(output.steps, span[1])
        return Verdict(label, None if step is None else self.p_unsafe(step))

    def p_unsafe(self, step: Step) -> float | None:
        sides = [(norm(w), "unsafe") for w in self.unsafe] + [(norm(w), "safe") for w in self.safe]
        mass = {"unsafe": 0.0, "safe": 0.0}
        for token, logprob in step.top:
            t = norm(token)
            hits = {side for word, side in sides if t and word.startswith(t)}
            if len(hits) == 1:  # a piece that begins words of one side only
                mass[hits.pop()] += math.exp(logprob)
        if mass["unsafe"] <= 0.0 or mass["safe"] <= 0.0:  # a side absent from the top logprobs: unknown
            return None
        return mass["unsafe"] / (mass["unsafe"] + mass["safe"])


def step_at(steps: Sequence[Step], offset: int) -> Step | None:
    """The step whose token holds character `offset` of the text the steps spell (None
    when they do not spell it that far)."""
    position = 0
    for step in steps:
        end = position + len(step.token)
        if position <= offset < end:
            # the label begins inside this token: only leading whitespace may come before it
            return step if not step.token[: offset - position].strip() else None
        position = end
    return None

#: The families this module defines (margin.guards.adapters.families gathers them).
ADAPTERS = (Prompted,)
