"""Shards: `--shard i/n` runs a deterministic slice of the prompts (every n-th, from the i-th).

Round-robin rather than blocks, so every shard gets a mix of the dataset's types and labels
and shards take similar time. `margin merge` joins the shards' run folders back into one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from margin.errors import InputError

T = TypeVar("T")


def parse_shard(text: str) -> tuple[int, int]:
    """`i/n` with 1 <= i <= n, e.g. `1/4` for the first of four shards."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i = n = 0
    if not sep or n < 1 or not 1 <= i <= n:
        raise InputError(f"expected i/n with 1 <= i <= n (e.g. 1/4), got {text!r}", field="--shard")
    return i, n


def select_shard(items: Sequence[T], shard: tuple[int, int] | None) -> tuple[T, ...]:
    if shard is None:
        return tuple(items)
    i, n = shard
    return tuple(items[i - 1 :: n])
