"""An independent reference for margin's cost: textbook dynamic-programming Levenshtein over
code points (margin itself uses rapidfuzz), so a test can fail if the cost were wrong."""

from __future__ import annotations


def levenshtein(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]
