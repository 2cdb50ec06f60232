"""The leaderboard snapshot's one model: `snapshot.build_snapshot` builds it and
`validate_snapshot` reads it back (`margin site`, `diff`, `check`), checking the fields the
public Margin API promises, one known protocol throughout, ranks in order and robust-accuracy
curves that are step functions on [0, B] with fractions 0..1. Callers hold the model and read
it by attribute; `document()` is the JSON object, written only where a file is.

The snapshot's version is its `meta.protocol` (a `Literal`): a file of another protocol is
refused by name. Older files of a known protocol lack fields written since (`min_coverage`,
a record's coverage `total`, `invalid`, `complete`): those stay unset, so the model writes the
file back as it was, and the rules that need them derive them (`Coverage.totals`).

Fields are declared in the order a snapshot writes them and numbers keep their type, so a
snapshot built through the model is the JSON it always was. Every number is a finite int or
float, never NaN, an infinity, a bool or a numeric string: a snapshot is refused, built or
read, with the field that holds one."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, ClassVar

from pydantic import conlist, field_serializer, field_validator

from margin.errors import InputError
from margin.reports.completeness import Coverage
from margin.reports.documents import Document, Number, Open, read_model
from margin.reports.protocols import (
    ADAPTIVE_PROTOCOL,
    STANDARD_PROTOCOL,
    ProtocolId,
    protocol_for,
)
from margin.util.safefiles import check_date, check_id


class Band(Open):
    low: list[Number]
    high: list[Number]


class Curves(Open):
    budgets: list[Number]
    unsafe: list[Number] | None = None
    safe: list[Number] | None = None
    bands: dict[str, Band] = {}


class Headline(Open):
    """The headline figures (`types.HEADLINE_FIGURES`, in that order) with their intervals."""

    balanced_margin: Number | None
    unsafe_margin: Number | None
    safe_margin: Number | None
    clean_balanced_accuracy: Number | None
    confidence_intervals: dict[str, conlist(Number, min_length=2, max_length=2) | None] = {}  # type: ignore[valid-type]
    clean_accuracy: dict[str, Number | None] = {}

    def figure(self, name: str) -> float | None:
        """A headline figure, or one class's clean accuracy named `clean_{label}_accuracy`."""
        if name in Headline.model_fields:
            return getattr(self, name)  # type: ignore[no-any-return]
        return self.clean_accuracy.get(name.removeprefix("clean_").removesuffix("_accuracy"))

    def interval(self, name: str) -> list[float] | None:
        return self.confidence_intervals.get(name)


class FigureSet(Headline):
    """A slice's figures: the headline, its coverage and (without bands) its curves."""

    coverage: Coverage | None = None
    curves: Curves | None = None


class Evaluation(Open):
    """How a guard was measured: its identity (`GuardInfo`) and the run's search."""

    checkpoint: str | None = None
    revision: str | None = None
    backend: str | None = None
    family: str | None = None
    template: str | None = None
    template_sha256: str | None = None
    threshold: Number | None = None
    params: dict[str, Any] = {}
    caveats: list[str] = []
    scope: str | None = None
    search: str | None = None
    seed: int | None = None
    normalize: str | None = None


class Identified(Open):
    id: str
    rank: int | None  # None: not ranked (coverage below the snapshot's min_coverage)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_id(value)


class Record(Headline, Identified):  # fields: id and rank first, then the headline, then these
    evaluation: Evaluation
    coverage: Coverage
    curves: Curves
    slices: dict[str, dict[str, FigureSet]] = {}


class NamedRef(Open):
    name: str | None
    sha256: str | None


class Provenance(Open):
    margin_version: str | None = None
    git_commit: str | None = None
    dataset: NamedRef
    suite: NamedRef
    budget: Number
    cost_norm: str | None = None
    corpus_mean_length: Number | None = None

    @field_validator("budget")
    @classmethod
    def _positive(cls, budget: Number) -> Number:
        if budget <= 0:
            raise ValueError("Input should be greater than 0")
        return budget


class Meta(Open):
    snapshot_date: dt.date
    snapshot_url: str | None = None
    protocol: ProtocolId
    units: dict[str, str] = {}
    methodology: str
    confidence_intervals: dict[str, Any] = {}
    provenance: Provenance
    min_coverage: Number | None = None  # absent before coverage was checked

    @field_validator("snapshot_date", mode="before")
    @classmethod
    def _date(cls, value: Any) -> Any:
        # Part of the snapshot's file name: exactly YYYY-MM-DD, never a path or a timestamp.
        return value if isinstance(value, dt.date) else check_date(value)

    @field_validator("protocol", mode="before")
    @classmethod
    def _known(cls, protocol: Any) -> Any:
        if protocol not in (STANDARD_PROTOCOL, ADAPTIVE_PROTOCOL):
            raise ValueError(f"unknown protocol {protocol!r}; this margin reads {STANDARD_PROTOCOL} and "
                             f"{ADAPTIVE_PROTOCOL}")
        return protocol

    @field_validator("min_coverage")
    @classmethod
    def _share(cls, share: Number | None) -> Number | None:
        if share is not None and not 0 <= share <= 1:
            raise ValueError("Input should be a share between 0 and 1")
        return share

    @field_serializer("snapshot_date")
    def _iso(self, date: dt.date) -> str:
        return date.isoformat()


class Snapshot(Document):
    KIND: ClassVar[str] = "guardrails"
    meta: Meta
    data: list[Record]

    def record(self, guard_id: str) -> Record | None:
        return next((r for r in self.data if r.id == guard_id), None)


def _check_curves(curves: Curves, budget: float, where: str | Path, at: str) -> None:
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


def _check_rank(rec: Record, index: int, data: list[Record], min_coverage: float | None,
                where: str | Path) -> None:
    """Ranked records come first, 1, 2, ...; an unranked one (rank null) is incomplete and
    follows them; a ranked one meets the snapshot's min_coverage; `complete` agrees with `missing`."""
    at = f"data[{index}]"
    coverage = rec.coverage
    if coverage.complete is not None and coverage.complete != coverage.is_complete():
        raise InputError("complete disagrees with the missing counts", path=where, field=f"{at}.coverage.complete")
    if rec.rank is None:
        if coverage.is_complete() and any(coverage.scored.values()):
            raise InputError("a complete record must be ranked", path=where, field=f"{at}.rank")
        return
    if rec.rank != index + 1 or any(r.rank is None for r in data[:index]):
        raise InputError(f"rank {rec.rank} at position {index + 1}: records must be in rank order, "
                         "unranked ones last", path=where, field=f"{at}.rank")
    if min_coverage is not None and not coverage.meets(min_coverage):
        raise InputError(f"ranked with coverage below the snapshot's min_coverage {100 * min_coverage:g}%: "
                         + coverage.describe(), path=where, field=f"{at}.rank")


def validate_snapshot(snapshot: Any, where: str | Path) -> Snapshot:
    """A leaderboard snapshot read into the model and checked for internal consistency (known
    protocol, ranks in order, one protocol throughout, curves that are step functions on [0, B])."""
    return check_snapshot(read_model(Snapshot, snapshot, where), where)


def check_snapshot(parsed: Snapshot, where: str | Path) -> Snapshot:
    """What the model's fields alone cannot say: ranks, protocols, ids and curves agree."""
    protocol = parsed.meta.protocol
    budget = parsed.meta.provenance.budget
    seen: set[str] = set()
    for index, rec in enumerate(parsed.data):
        at = f"data[{index}]"
        _check_rank(rec, index, parsed.data, parsed.meta.min_coverage, where)
        if rec.id in seen:
            raise InputError(f"guard {rec.id!r} appears twice", path=where, field=f"{at}.id")
        seen.add(rec.id)
        search = rec.evaluation.search
        if search is not None and protocol_for(str(search)) != protocol:
            raise InputError(f"guard {rec.id!r} was measured with an {search} search ({protocol_for(str(search))}), "
                             f"mixed into a {protocol} snapshot: margins of different protocols are never ranked "
                             "together", path=where, field=f"{at}.evaluation.search")
        _check_curves(rec.curves, budget, where, f"{at}.curves")
    margins = [r.balanced_margin for r in parsed.data if r.rank is not None]
    ranked = sorted(margins, key=lambda m: -(m if m is not None else -1.0))
    if margins != ranked:
        raise InputError("records are not ordered by balanced margin", path=where, field="data")
    return parsed
