"""Candidate building: every suite transform and strength applied to one prompt, costed.

Pure and cheap: no guard is involved. Texts equal to the original are dropped, duplicates
keep their first occurrence, candidates over budget are dropped, and the rest are sorted
by cost, then suite order.
"""

from __future__ import annotations

from margin.cost import CostModel
from margin.transforms.registry import get_transform
from margin.transforms.suites import EACH_WORD, Suite
from margin.transforms.words import word_spans
from margin.types import Candidate, Prompt


def expand_strengths(strengths: tuple[str, ...], text: str) -> list[str]:
    out: list[str] = []
    for strength in strengths:
        if strength == EACH_WORD:
            out.extend(f"@{i}" for i in range(len(word_spans(text))))
        else:
            out.append(strength)
    return out


def build_candidates(
    prompt: Prompt, suite: Suite, cost_model: CostModel, budget: float, seed: int
) -> list[Candidate]:
    seen = {prompt.text}
    ranked: list[tuple[float, int, Candidate]] = []
    for entry in suite.entries:
        transform = get_transform(entry.transform)
        for strength in expand_strengths(entry.strengths, prompt.text):
            text = transform.apply(prompt.text, strength, seed)
            if text in seen:
                continue
            seen.add(text)
            cost = cost_model.cost(prompt.text, text)
            if cost > budget:
                continue
            candidate = Candidate(prompt.id, entry.transform, strength, seed, text, cost)
            ranked.append((cost, len(ranked), candidate))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [candidate for _, _, candidate in ranked]


def original_candidate(prompt: Prompt, seed: int) -> Candidate:
    return Candidate(prompt.id, None, None, seed, prompt.text, 0.0)
