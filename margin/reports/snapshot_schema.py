"""The leaderboard snapshot's shape, checked when a snapshot is read back (`margin site`):
the fields the public Margin API promises, one known protocol throughout, ranks in order and
robust-accuracy curves that are step functions on [0, B] with fractions 0..1."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic import Field as PydanticField

from margin.errors import InputError
from margin.reports.completeness import describe, is_complete, meets
from margin.reports.protocols import ADAPTIVE_PROTOCOL, protocol_for
from margin.reports.snapshot import PROTOCOL


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Band(_Open):
    low: list[float]
    high: list[float]


class _Curves(_Open):
    budgets: list[float]
    unsafe: list[float] | None = None
    safe: list[float] | None = None
    bands: dict[str, _Band] = {}


class _Coverage(_Open):
    scored: dict[str, int]
    missing: dict[str, int]
    total: dict[str, int] | None = None
    invalid: dict[str, int] | None = None
    complete: bool | None = None
    reason: str | None = None


class _Figures(_Open):
    balanced_margin: float | None
    unsafe_margin: float | None
    safe_margin: float | None
    clean_balanced_accuracy: float | None
    confidence_intervals: dict[str, tuple[float, float] | None] = {}
    clean_accuracy: dict[str, float | None] = {}
    coverage: _Coverage | None = None
    curves: _Curves | None = None


class _Evaluation(_Open):
    caveats: list[str] = []


class _Record(_Figures):
    id: str
    rank: int | None  # None: not ranked (coverage below the snapshot's min_coverage)
    evaluation: _Evaluation
    coverage: _Coverage
    curves: _Curves
    slices: dict[str, dict[str, _Figures]] = {}


class _Named(_Open):
    name: str | None
    sha256: str | None


class _Provenance(_Open):
    dataset: _Named
    suite: _Named
    budget: float = PydanticField(gt=0)


class _Meta(_Open):
    snapshot_date: dt.date
    protocol: str
    methodology: str
    provenance: _Provenance
    min_coverage: float | None = PydanticField(default=None, ge=0, le=1)  # absent before coverage was checked


class _Snapshot(_Open):
    meta: _Meta
    data: list[_Record]


def _check_curves(curves: _Curves, budget: float, where: str | Path, at: str) -> None:
    points = curves.budgets
    if not points or points[0] != 0 or any(b <= a for a, b in zip(points, points[1:], strict=False)) \
            or points[-1] > budget:
        raise InputError(f"budgets must rise strictly from 0 to at most the budget {budget:g}",
                         path=where, field=f"{at}.budgets")
    series = {label: values for label in ("unsafe", "safe") if (values := getattr(curves, label)) is not None}
    series.update({f"bands.{label}.{end}": getattr(band, end)
                   for label, band in curves.bands.items() for end in ("low", "high")})
    for name, values in series.items():
        if len(values) != len(points):
            raise InputError(f"{len(values)} values for {len(points)} budgets", path=where, field=f"{at}.{name}")
        if any(not 0 <= v <= 1 for v in values):
            raise InputError("robust accuracy is a fraction 0..1", path=where, field=f"{at}.{name}")


def _check_rank(rec: _Record, index: int, data: list[_Record], min_coverage: float | None,
                where: str | Path) -> None:
    """Ranked records come first, 1, 2, ...; an unranked one (rank null) is incomplete and
    follows them; a ranked one meets the snapshot's min_coverage; `complete` agrees with `missing`."""
    at = f"data[{index}]"
    coverage = rec.coverage.model_dump()
    if rec.coverage.complete is not None and rec.coverage.complete != is_complete(coverage):
        raise InputError("complete disagrees with the missing counts", path=where, field=f"{at}.coverage.complete")
    if rec.rank is None:
        if is_complete(coverage) and any(rec.coverage.scored.values()):
            raise InputError("a complete record must be ranked", path=where, field=f"{at}.rank")
        return
    if rec.rank != index + 1 or any(r.rank is None for r in data[:index]):
        raise InputError(f"rank {rec.rank} at position {index + 1}: records must be in rank order, "
                         "unranked ones last", path=where, field=f"{at}.rank")
    if min_coverage is not None and not meets(coverage, min_coverage):
        raise InputError(f"ranked with coverage below the snapshot's min_coverage {100 * min_coverage:g}%: "
                         + describe(coverage), path=where, field=f"{at}.rank")


def validate_snapshot(snapshot: Any, where: str | Path) -> dict[str, Any]:
    """Check a leaderboard snapshot's shape and internal consistency (known protocol, ranks in
    order, one protocol throughout, curves that are step functions on [0, B]); returns it unchanged."""
    try:
        parsed = _Snapshot.model_validate(snapshot)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(first["msg"], path=where, field=".".join(str(p) for p in first["loc"])) from None
    protocol = parsed.meta.protocol
    if protocol not in (PROTOCOL, ADAPTIVE_PROTOCOL):
        raise InputError(f"unknown protocol {protocol!r}; this margin reads {PROTOCOL} and {ADAPTIVE_PROTOCOL}",
                         path=where, field="meta.protocol")
    budget = parsed.meta.provenance.budget
    seen: set[str] = set()
    for index, rec in enumerate(parsed.data):
        at = f"data[{index}]"
        _check_rank(rec, index, parsed.data, parsed.meta.min_coverage, where)
        if rec.id in seen:
            raise InputError(f"guard {rec.id!r} appears twice", path=where, field=f"{at}.id")
        seen.add(rec.id)
        search = rec.evaluation.model_extra.get("search") if rec.evaluation.model_extra else None
        if search is not None and protocol_for(str(search)) != protocol:
            raise InputError(f"guard {rec.id!r} was measured with an {search} search ({protocol_for(str(search))}), "
                             f"mixed into a {protocol} snapshot: margins of different protocols are never ranked "
                             "together", path=where, field=f"{at}.evaluation.search")
        _check_curves(rec.curves, budget, where, f"{at}.curves")
    margins = [r.balanced_margin for r in parsed.data if r.rank is not None]
    ranked = sorted(margins, key=lambda m: -(m if m is not None else -1.0))
    if margins != ranked:
        raise InputError("records are not ordered by balanced margin", path=where, field="data")
    return snapshot  # type: ignore[no-any-return]
