"""Seeded draws for transforms: hash-based, so they are cheap, and stable across runs,
hosts and Python versions (a 64-bit BLAKE2b of the seed and a label)."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")


@functools.lru_cache(maxsize=1 << 16)  # many transforms draw for the same (seed, position)
def hash64(*parts: object) -> int:
    key = ":".join(str(p) for p in parts).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big")


class Draws:
    """The draws made for one edit: the n-th draw hashes (label, n)."""

    __slots__ = ("label", "n")

    def __init__(self, *label: object) -> None:
        self.label = _label(label)
        self.n = 0

    def randrange(self, stop: int) -> int:
        if stop < 1:
            raise ValueError("randrange() needs a positive stop")
        self.n += 1
        return hash64("margin", self.label, self.n) % stop  # 64 bits: bias below 1e-17

    def choice(self, options: Sequence[T]) -> T:
        return options[self.randrange(len(options))]


@functools.lru_cache(maxsize=1 << 16)  # one label string per (seed, position): its hash is computed once
def _label(parts: tuple[object, ...]) -> str:
    return ":".join(map(str, parts))


def first_choices(seed: int, positions: Sequence[int], options: Sequence[Sequence[T]]) -> list[T]:
    """`[Draws(seed, p).choice(o) for p, o in zip(positions, options)]` in one pass: the
    first draw of an edit's draws, for transforms that make one choice per edit."""
    out: list[T] = []
    for position, choices in zip(positions, options, strict=True):
        if not choices:
            raise ValueError("randrange() needs a positive stop")
        out.append(choices[hash64("margin", _label((seed, position)), 1) % len(choices)])
    return out


def shuffled(items: Iterable[int], *label: object) -> list[int]:
    """`items` in a seeded order: sorted by the hash of (label, item)."""
    return sorted(items, key=lambda item: hash64("margin", *label, item))


def seeded_order(positions: Sequence[int], seed: int) -> list[int]:
    """Edit positions in the seeded order that `k` and `p%` strengths take them in."""
    return shuffled(positions, seed, "order")
