"""Close-match suggestions for misspelt names in errors."""

from __future__ import annotations

from collections.abc import Iterable

from rapidfuzz import process


def closest(name: str, choices: Iterable[str], limit: int = 3) -> list[str]:
    return [match for match, score, _ in process.extract(name, list(choices), limit=limit) if score >= 50]


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    hint = closest(name, choices)
    return f"; did you mean {', '.join(hint)}?" if hint else ""
