"""`python:PATH.py:ClassName`: a user's own guard, any class with `classify(self, texts)`.

Items may be Verdicts (p_unsafe in [0, 1] or none) or the strings "safe" / "unsafe"; anything
else is `invalid`.

The guard's identity is the wrapper file's SHA-256 and what its spec declares: `weights` (a
file or folder, or `package:NAME[/PATH]` inside an installed package, content-hashed, so a
model upgrade is a new guard and never reuses the old one's cached verdicts), `revision`
and `threshold`. Declared `weights` and `threshold` are passed to the class as the keyword
arguments `weights` (a Path) and `threshold` (a float).
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.declared_weights import PACKAGE, weights_path
from margin.guards.shapes import TEXT, WHOLE_CASES
from margin.guards.spec import threshold_tag
from margin.types import GuardInfo, Verdict
from margin.util.hashing import sha256_bytes, sha256_tree


def coerce(item: Any) -> Verdict:
    if isinstance(item, Verdict):
        return checked(item)
    if item in ("safe", "unsafe"):
        return Verdict(item, raw=item)
    return Verdict("invalid", raw=repr(item)[:500])


def checked(verdict: Verdict) -> Verdict:
    """The guard's Verdict, its p_unsafe a plain float; `invalid` (the Verdict as its raw output)
    when its label is not one margin knows or its p_unsafe is not a number in [0, 1] (NaN, inf,
    1.3): such an output has no classification, and a NaN is not JSON that polars reads."""
    p = verdict.p_unsafe
    if p is not None:
        try:
            p = float(p)
        except (TypeError, ValueError):
            p = math.nan
    if verdict.label not in ("safe", "unsafe", "invalid") or (p is not None and not 0.0 <= p <= 1.0):  # NaN too
        return Verdict("invalid", raw=repr(verdict)[:500])
    return verdict._replace(p_unsafe=p)


def load_class(path: str, class_name: str) -> Any:
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
    return cls


def construct(cls: Any, kwargs: dict[str, Any], path: str) -> Any:
    """The class called with the declared settings; one it cannot take is an error naming it."""
    try:
        parameters = inspect.signature(cls).parameters.values()
    except (TypeError, ValueError):  # no signature to read: let the call decide
        parameters = None
    if parameters is not None and not any(p.kind is p.VAR_KEYWORD for p in parameters):
        names = {p.name for p in parameters}
        for key in kwargs:
            if key not in names:
                raise InputError(f"{cls.__name__}() takes no `{key}` argument; declare it to receive the "
                                 f"guard file's `{key}`", path=path, field=key)
    try:
        return cls(**kwargs)
    except Exception as exc:  # the user's setup (a missing file, a bad argument): one line, not a traceback
        raise InputError(f"{cls.__name__}() failed: {type(exc).__name__}: {exc}", path=path) from None


class PythonClassGuard(Guard):
    def __init__(self, path: str, class_name: str, *, weights: str | None = None,
                 revision: str | None = None, threshold: float | None = None) -> None:
        file = Path(path)
        cls = load_class(path, class_name)
        kwargs: dict[str, Any] = {}
        params: list[tuple[str, str]] = []
        if weights is not None:
            found = weights_path(weights)
            kwargs["weights"] = found
            shown = weights if weights.startswith(PACKAGE) else found.name  # never a local folder's path
            params += [("weights", shown), ("weights_sha256", sha256_tree(found))]
        if threshold is not None:
            kwargs["threshold"] = threshold
        self.impl = construct(cls, kwargs, path)
        self.max_batch_size = int(getattr(self.impl, "max_batch_size", Guard.max_batch_size))
        # A class takes texts (the target's, whichever turn it is) unless it opts in to whole cases.
        self.shapes = WHOLE_CASES if getattr(self.impl, "takes_cases", False) is True else TEXT
        wrapper = sha256_bytes(file.read_bytes())[:16]
        name = str(getattr(self.impl, "guard_id", f"python:{file.name}:{class_name}"))
        self._info = GuardInfo(
            id=name + threshold_tag(threshold, None),
            family="python",
            checkpoint=f"{file.name}:{class_name}",
            revision=f"{revision}+wrapper.{wrapper}" if revision else wrapper,
            backend="python",
            threshold=threshold if threshold is not None else getattr(self.impl, "threshold", None),
            params=tuple(params),
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
