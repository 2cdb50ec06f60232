"""Candidate building: every suite transform and strength applied to one prompt, costed.

Pure and cheap: no guard is involved. Texts equal to the original are dropped, duplicates
keep their first occurrence, candidates over budget are dropped, and the rest are sorted
by cost, then suite order.

Built in bulk per prompt: each transform makes all its strengths' texts in one pass
(`Transform.apply_many`) and rapidfuzz measures every distance in one call.
"""

from __future__ import annotations

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

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
    original = prompt.text
    names: list[str] = []
    strengths: list[str] = []
    texts: list[str] = []
    for entry in suite.entries:
        expanded = expand_strengths(entry.strengths, original)
        texts.extend(get_transform(entry.transform).apply_many(original, expanded, seed))
        names.extend([entry.transform] * len(expanded))
        strengths.extend(expanded)
    if not texts:
        return []
    distances = process.cdist([original], texts, scorer=Levenshtein.distance, workers=1)[0].tolist()
    denominator = cost_model.denominator(original)
    seen = {original}
    kept: list[tuple[float, int]] = []
    for index, (text, distance) in enumerate(zip(texts, distances, strict=True)):
        if text in seen:
            continue
        seen.add(text)
        cost = distance * 100.0 / denominator  # exactly CostModel.cost's arithmetic
        if cost <= budget:
            kept.append((cost, index))
    kept.sort()  # by cost, then suite order
    return [Candidate(prompt.id, names[i], strengths[i], seed, texts[i], cost) for cost, i in kept]


def original_candidate(prompt: Prompt, seed: int) -> Candidate:
    return Candidate(prompt.id, None, None, seed, prompt.text, 0.0)
