"""The site's HTML pages, rendered from snapshots with Jinja2 templates (margin/site/templates).

Jinja2 escapes every value by default, and a snapshot is data from elsewhere (guard names,
caveats, judge settings), so nothing in one can become markup. Here: the view of each page
built from the snapshot (pure), and one `render_*` function per page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from margin.reports.completeness import Coverage
from margin.reports.pairings import Entity, ModelEntity, Pairings, PairRecord, model_order
from margin.reports.snapshot_schema import Evaluation, FigureSet, Record
from margin.site.inputs import PublishedFile, SiteInputs
from margin.site.svg import LadderPoint, curves_svg, ladder_svg
from margin.types import HEADLINE_FIGURES
from margin.util.display import make_visible
from margin.util.provenance import margin_version

API = {"guardrails": "api/v1/margin/guardrails", "pairings": "api/v1/margin/pairings"}
STATUS_TEXT = {"bypass_found": "bypass found", "no_bypass_found": "none found", "incomplete": "incomplete",
               None: "not tested"}


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    note: str = ""
    numeric: bool = True
    first: str = "descending"  # the direction of a column's first sort: best first


#: How the leaderboard shows each headline figure (title, note), in the figures' own order.
FIGURE_LABELS = {
    "balanced_margin": ("Balanced margin", "both classes, 0–100"),
    "unsafe_margin": ("Unsafe margin", "false allows, 0–100"),
    "safe_margin": ("Safe margin", "false blocks, 0–100"),
    "clean_balanced_accuracy": ("Clean balanced accuracy", "% on original prompts"),
}
COLUMNS = (
    Column("rank", "Rank", numeric=True, first="ascending"),
    Column("guard", "Guard", numeric=False, first="ascending"),
    *(Column(name, *FIGURE_LABELS[name]) for name in HEADLINE_FIGURES),  # a figure without a label fails here
)
FIRST_FIELDS = ("checkpoint", "revision", "backend", "family", "threshold", "params", "search", "seed",
                "template_sha256", "margin_version", "git_commit")


def anchor(kind: str, *parts: str) -> str:
    """An HTML id (and URL fragment) from ids that may hold any character; distinct ids stay distinct."""
    return "-".join([kind, *(re.sub(r"[^A-Za-z0-9_]", lambda m: f"-{ord(m.group()):x}-", p) for p in parts)])


def num(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def interval(pair: Sequence[float] | None, digits: int = 2, scale: float = 1.0) -> str:
    return "" if pair is None else f"[{pair[0] * scale:.{digits}f}, {pair[1] * scale:.{digits}f}]"


def percent(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{100 * value:.{digits}f}%"


def plain(value: Any) -> str:
    """A provenance value as one line of text."""
    if value is None or value == "" or value == [] or value == {}:
        return "—"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={plain(v)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ", ".join("=".join(map(plain, v)) if isinstance(v, list | tuple) else plain(v) for v in value)
    return f"{value:g}" if isinstance(value, float) else str(value)


def visible(value: Any) -> Any:
    """Every text a page shows, before Jinja escapes it: control and bidi characters as
    `<U+XXXX>` (markup margin built, such as the SVG, made its own texts visible)."""
    return make_visible(value) if isinstance(value, str) and not isinstance(value, Markup) else value


def name_of(entity: Entity) -> str:
    """A pairings guard's or model's display name: its name, else its id."""
    return entity.name or entity.id


# ---- leaderboard ----------------------------------------------------------------------------

@dataclass(frozen=True)
class SliceRow:
    value: str
    figures: FigureSet

    def ci(self, name: str) -> list[float] | None:
        return self.figures.interval(name)

    def accuracy(self, label: str) -> float | None:
        return self.figures.clean_accuracy.get(label)

    @property
    def counts(self) -> str:
        scored = self.figures.coverage.scored if self.figures.coverage else {}
        return " / ".join(str(scored.get(label, 0)) for label in ("unsafe", "safe"))


@dataclass(frozen=True)
class GuardView:
    record: Record
    anchor: str
    curves: Markup
    slices: list[tuple[str, list[SliceRow]]]
    provenance: list[tuple[str, str]]
    template: str
    pairs: list[PairRecord] = field(default_factory=list)

    def ci(self, name: str) -> list[float] | None:
        return self.record.interval(name)

    def accuracy(self, label: str) -> float | None:
        return self.record.clean_accuracy.get(label)

    @property
    def coverage(self) -> Coverage:
        return self.record.coverage

    @property
    def complete(self) -> bool:
        return self.coverage.is_complete()

    @property
    def coverage_short(self) -> str:
        """`unsafe 24/24, safe 0/24`: prompts scored of the total, per class."""
        return self.coverage.scored_of_total()

    @property
    def coverage_text(self) -> str:
        return self.coverage.describe()

    def sort_value(self, key: str) -> str:
        if key == "guard":
            return self.record.id.casefold()
        value = self.record.rank if key == "rank" else self.record.figure(key)
        return "" if value is None else repr(float(value))


def provenance_items(evaluation: Evaluation) -> list[tuple[str, str]]:
    """Every field the evaluation holds (an open set: runs and publish add their own), the
    usual ones first, in the order the snapshot lists them."""
    held = evaluation.document()
    keys = [k for k in FIRST_FIELDS if k in held]
    keys += [k for k in held if k not in keys and k not in ("caveats", "template", "scope")]
    return [(k.replace("_", " "), plain(held[k])) for k in keys]


def guard_view(record: Record, budget: float, pairs: list[PairRecord]) -> GuardView:
    ident = anchor("guard", record.id)
    svg = curves_svg(record.curves, budget, ident=f"{ident}-curves",
                     title=f"Robust accuracy of {record.id} against the cost budget",
                     margins={"unsafe": record.unsafe_margin, "safe": record.safe_margin})
    slices = [(dimension, [SliceRow(value, figures) for value, figures in values.items()])
              for dimension, values in record.slices.items()]
    template = record.evaluation.template
    return GuardView(record, ident, Markup(svg), slices, provenance_items(record.evaluation),
                     template if isinstance(template, str) else plain(template), pairs)


def names_of(pairings: Pairings | None) -> dict[str, str]:
    if pairings is None:
        return {}
    return {e.id: name_of(e) for e in [*pairings.meta.guards, *pairings.meta.models]}


# ---- pairings ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cell:
    """A guard x model cell: the tested pair's record, or None for a pair never tested."""

    guard: Entity
    model: ModelEntity
    pair: PairRecord | None = None

    @property
    def complete(self) -> bool:
        return self.pair is None or self.pair.is_complete()

    @property
    def status(self) -> str | None:
        """The pair's status, or `incomplete` (PairRecord.shown_status): a pair with missing
        outputs is never drawn as none found."""
        return None if self.pair is None else self.pair.shown_status()

    @property
    def coverage_text(self) -> str:
        return "" if self.pair is None else self.pair.coverage_note()

    @property
    def anchor(self) -> str:
        return anchor("pair", self.guard.id, self.model.id)

    @property
    def short(self) -> str:
        if self.pair is None:
            return "–"
        return f"{self.pair.qualifying_transformations}/{self.pair.transformations_tested}"

    @property
    def label(self) -> str:
        head = f"{name_of(self.guard)} × {name_of(self.model)}: "
        if self.pair is None:
            return head + "not tested"
        return (head + STATUS_TEXT[self.status] + f", {self.pair.qualifying_transformations} of "
                f"{self.pair.transformations_tested} tested transformations qualify"
                + ("" if self.complete else f"; incomplete evidence: {self.coverage_text}"))


def matrix(pairings: Pairings) -> tuple[list[ModelEntity], list[tuple[Entity, list[Cell]]]]:
    """(columns: models in ladder order, rows: each guard with one cell per model)."""
    models = model_order(pairings.meta.models)
    pairs = {(d.guard_id, d.model_id): d for d in pairings.data}
    rows = [(g, [Cell(g, m, pairs.get((g.id, m.id))) for m in models]) for g in pairings.meta.guards]
    return models, rows


def ladder_points(pairings: Pairings) -> tuple[list[LadderPoint], list[ModelEntity]]:
    """(placed points, tested models lacking a weight size or capability index). Pairs with
    missing outputs and no bypass found are left out: none found there means nothing measured."""
    placed, unplaced = [], []
    for model in model_order(pairings.meta.models):
        tested = [d for d in pairings.data if d.model_id == model.id and d.measured()]
        if not tested:
            continue
        size, index = model.parameters_b, model.capability_index
        if size is None or index is None or size <= 0:
            unplaced.append(model)
            continue
        placed.append(LadderPoint(model.id, name_of(model), float(size), float(index),
                                  sum(d.status == "bypass_found" for d in tested), len(tested)))
    return placed, unplaced


# ---- rendering --------------------------------------------------------------------------------

def environment() -> Environment:
    env = Environment(loader=PackageLoader("margin.site", "templates"), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                      finalize=visible)
    env.filters.update(num=num, interval=interval, percent=percent, plain=plain)
    env.globals.update(anchor=anchor, name_of=name_of, STATUS_TEXT=STATUS_TEXT, API=API,
                       margin_version=margin_version())
    return env


@dataclass(frozen=True)
class Pages:
    """Renders every page of one site; `inputs` says which snapshots are current."""

    inputs: SiteInputs
    env: Environment = field(default_factory=environment)

    def _render(self, template: str, **context: Any) -> str:
        nav = {"guardrails": self.inputs.current("guardrails") is not None,
               "pairings": self.inputs.current("pairings") is not None}
        return self.env.get_template(template).render(nav=nav, **context)

    def _archive_note(self, snap: PublishedFile, page: str) -> dict[str, Any]:
        current = self.inputs.current(snap.kind)
        return {"active": snap.kind if page == "current" else "archive", "snap": snap, "permanent": page != "current",
                "is_current": current is not None and current.name == snap.name,
                "current_page": {"guardrails": "index.html", "pairings": "pairings.html"}[snap.kind]}

    def _current_pairings(self) -> Pairings | None:
        current = self.inputs.current("pairings")
        return current.pairings if current else None

    def leaderboard(self, snap: PublishedFile, page: str = "current") -> str:
        snapshot, pairings = snap.snapshot, self._current_pairings()
        tested = pairings.data if pairings else []
        budget = float(snapshot.meta.provenance.budget)
        guards = [guard_view(r, budget, [d for d in tested if d.guard_id == r.id]) for r in snapshot.data]
        return self._render("leaderboard.html", meta=snapshot.meta, guards=guards, columns=COLUMNS,
                            figures=HEADLINE_FIGURES, names=names_of(pairings), **self._archive_note(snap, page))

    def pairings(self, snap: PublishedFile, page: str = "current") -> str:
        pairings = snap.pairings
        models, rows = matrix(pairings)
        placed, unplaced = ladder_points(pairings)
        ladder = Markup(ladder_svg(placed)) if placed else None
        incomplete = [c for _, cells in rows for c in cells if c.pair is not None and not c.complete]
        return self._render("pairings.html", meta=pairings.meta, thresholds=pairings.meta.thresholds,
                            models=models, rows=rows, ladder=ladder, incomplete=incomplete,
                            points=placed, unplaced=unplaced, **self._archive_note(snap, page))

    def methodology(self) -> str:
        leaderboard, pairings = self.inputs.current("guardrails"), self._current_pairings()
        return self._render("methodology.html", active="methodology",
                            leaderboard=leaderboard.snapshot.meta if leaderboard else None,
                            pairings=pairings.meta if pairings else None,
                            thresholds=pairings.meta.thresholds if pairings else None)

    def archive(self) -> str:
        return self._render("archive.html", active="archive", inputs=self.inputs,
                            current={k: (c.name if (c := self.inputs.current(k)) else None)
                                     for k in ("guardrails", "pairings")})
