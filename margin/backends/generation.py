"""What a generative backend hands an adapter: the output text and, per step, the logprobs.

Backends differ in how they spell tokens (byte-level pieces, sentencepiece `▁`, decoded
strings), so adapters match label tokens by their decoded text, stripped and casefolded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Step:
    """One generated token: its decoded text and the top candidates with their logprobs
    (the sampled token is among them whenever the backend returns it)."""

    token: str
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class Generation:
    """One completed model output.

    `text` is the visible output; `raw` keeps special tokens where the backend can (Harmony
    channel markers); `reasoning` holds a reasoning channel a server split off; `truncated`
    says generation stopped at the token limit instead of at an end token.
    """

    text: str
    steps: tuple[Step, ...] = ()
    raw: str | None = None
    reasoning: str | None = None
    truncated: bool = False


@dataclass(frozen=True)
class GuardRequest:
    """What an adapter asks a backend to complete for one text.

    Either `messages` (rendered with the checkpoint's chat template, or sent to a chat
    endpoint) or `prompt` (an already formatted raw prompt, for families without a chat
    template). `chat_template_kwargs` reach the template (ShieldGemma's guideline, Granite's
    guardian_config); `extra` are request fields for HTTP backends (reasoning_effort).
    """

    messages: tuple[dict[str, Any], ...] | None = None
    prompt: str | None = None
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    add_generation_prompt: bool = True
    max_new_tokens: int = 20
    keep_special_tokens: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def norm(token: str) -> str:
    """A token's text as labels are compared: no surrounding whitespace, quotes or `▁`."""
    return token.replace("▁", " ").strip().strip('"').strip().casefold()


def label_mass(step: Step, labels: Sequence[str], *, prefix: bool = False) -> dict[str, float]:
    """Probability mass per label among a step's candidates.

    Exact match by default. With `prefix`, a candidate counts for a label when it is a
    non-empty prefix of exactly one label (the first piece of a multi-token label).
    """
    wanted = [norm(label) for label in labels]
    mass = dict.fromkeys(labels, 0.0)
    for token, logprob in step.top:
        t = norm(token)
        if not t:
            continue
        hits = [lab for lab, w in zip(labels, wanted, strict=True) if (w.startswith(t) if prefix else w == t)]
        if len(hits) == 1:
            mass[hits[0]] += math.exp(logprob)
    return mass


def matches_label(token: str, labels: Iterable[str], *, prefix: bool = False) -> bool:
    t = norm(token)
    if not t:
        return False
    hits = [lab for lab in labels if (norm(lab).startswith(t) if prefix else norm(lab) == t)]
    return len(hits) == 1


def decision_step(steps: Sequence[Step], labels: Sequence[str], *, after: str | None = None,
                  prefix: bool = False) -> Step | None:
    """The first step whose sampled token is a label, once `after` has appeared in the text
    generated before that step (None: from the first step)."""
    seen = ""
    for step in steps:
        if (after is None or after in seen) and matches_label(step.token, labels, prefix=prefix):
            return step
        seen += step.token
    return None


def share(masses: dict[str, float], positive: Iterable[str]) -> float | None:
    """P(positive labels) renormalised over the given labels; None unless every label was
    among the candidates. A label missing from the top logprobs is unknown, not zero: with
    a grammar or guided decoding a server's logprobs are the unconstrained distribution, in
    which an allowed label can fall out of the top k, and counting it as zero would score a
    reply against its own text."""
    if not masses or any(mass <= 0.0 for mass in masses.values()):
        return None
    total = sum(masses.values())
    return sum(masses[label] for label in positive) / total
