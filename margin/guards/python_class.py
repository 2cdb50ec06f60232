"""`python:PATH.py:ClassName`: a user's own guard, any class with `classify(self, texts)`.

Items may be Verdicts or the strings "safe" / "unsafe"; anything else is `invalid`.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.guards.base import Guard
from margin.types import GuardInfo, Verdict
from margin.util.hashing import sha256_bytes


def coerce(item: Any) -> Verdict:
    if isinstance(item, Verdict):
        return item
    if item in ("safe", "unsafe"):
        return Verdict(item, raw=item)
    return Verdict("invalid", raw=repr(item)[:500])


class PythonClassGuard(Guard):
    def __init__(self, path: str, class_name: str) -> None:
        file = Path(path)
        if not file.is_file():
            raise InputError("no such guard file", path=path, field="--guard")
        module_name = f"margin_user_guard_{sha256_bytes(str(file.resolve()).encode())[:12]}"
        spec = importlib.util.spec_from_file_location(module_name, file)
        if spec is None or spec.loader is None:
            raise InputError("cannot import guard file", path=path, field="--guard")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module  # dataclasses and pickling look modules up here
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise InputError(f"importing the guard file failed: {type(exc).__name__}: {exc}", path=path) from None
        cls = getattr(module, class_name, None)
        if cls is None or not callable(getattr(cls, "classify", None)):
            raise InputError(f"no class {class_name!r} with a classify(texts) method", path=path, field="--guard")
        self.impl = cls()
        self.max_batch_size = int(getattr(self.impl, "max_batch_size", Guard.max_batch_size))
        self._info = GuardInfo(
            id=str(getattr(self.impl, "guard_id", f"python:{file.name}:{class_name}")),
            family="python",
            checkpoint=f"{file.name}:{class_name}",
            revision=sha256_bytes(file.read_bytes())[:16],
            backend="python",
            threshold=getattr(self.impl, "threshold", None),
        )

    @property
    def info(self) -> GuardInfo:
        return self._info

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        items = list(self.impl.classify(list(texts)))
        if len(items) != len(texts):
            raise RuntimeError(f"guard returned {len(items)} items for {len(texts)} texts")
        return [coerce(item) for item in items]

    def close(self) -> None:
        if callable(close := getattr(self.impl, "close", None)):
            close()
