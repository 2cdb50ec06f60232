"""The book's memory of recent answers, bounded so that it does not grow with the run."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

ABSENT = object()


class Recent:
    """The latest answers, about `size` to twice `size` of them: when the young generation
    fills it becomes the old one and the old one is dropped (O(1), no per-entry order)."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self.young: dict[Hashable, Any] = {}
        self.old: dict[Hashable, Any] = {}

    def get(self, key: Hashable, default: Any = None) -> Any:
        found = self.young.get(key, ABSENT)
        if found is ABSENT:
            found = self.old.get(key, ABSENT)
        return default if found is ABSENT else found

    def __contains__(self, key: Hashable) -> bool:
        return key in self.young or key in self.old

    def __getitem__(self, key: Hashable) -> Any:
        found = self.get(key, ABSENT)
        if found is ABSENT:
            raise KeyError(key)
        return found

    def __setitem__(self, key: Hashable, value: Any) -> None:
        self.young[key] = value
        if len(self.young) >= self.size:
            self.old, self.young = self.young, {}

    def __len__(self) -> int:
        return len(self.young) + len(self.old)
