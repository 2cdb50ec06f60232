"""Padded batches by length: which rows of a batch run together.

A padded batch computes every row at the longest row's width, so a batch of candidates
whose lengths vary (a bare prompt beside one inside a role-play frame) spends much of its
work on padding: about half, for the standard suite's candidates in batches of 32 or more.
Rows sorted by length and cut where the padding would pass `slack` run nearly none, as long
as each chunk stays big enough (`min_tokens`) to keep the device busy; `max_tokens` bounds a
chunk's padded size (its key/value cache, prefix included).
"""

from __future__ import annotations

from collections.abc import Sequence


def length_chunks(lengths: Sequence[int], *, prefix: int = 0, slack: float = 0.15, min_tokens: int = 512,
                  max_tokens: int = 16384) -> list[list[int]]:
    """Row indices in chunks, by ascending length (ties in input order).

    A chunk is closed before the next row when adding it would make the chunk's padding more
    than `slack` of its real tokens while the chunk already holds `min_tokens` real tokens, or
    would take its padded size (rows x (prefix + width)) past `max_tokens`. One row always fits.
    """
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    chunks: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in order:
        n = lengths[i]  # ascending: the new row sets the chunk's width
        rows = len(current) + 1
        too_padded = rows * n > (1 + slack) * (real + n) and real >= min_tokens
        too_big = rows * (prefix + n) > max_tokens
        if current and (too_padded or too_big):
            chunks.append(current)
            current, real = [], 0
        current.append(i)
        real += n
    if current:
        chunks.append(current)
    return chunks
