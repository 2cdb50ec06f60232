"""Plots: robust-accuracy curves with Wilson bands, FPR vs FNR, the per-transform
effectiveness heatmap, the pairing matrix, the capability ladder and a defence ablation.

Each `*_figure` function returns a matplotlib Figure built without pyplot (no global state,
no display needed; a notebook shows it as it is). `save` writes it as PNG and SVG with no
timestamp, software version or random id inside, so the same data gives the same bytes, each
atomically (`margin.util.safefiles.atomic_file`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from margin.reports.ablation import DefenceRecord
from margin.reports.pairings import Entity, Pairings, model_order
from margin.reports.snapshot_schema import Curves, Record
from margin.util.display import make_visible
from margin.util.safefiles import atomic_file

if TYPE_CHECKING:
    from matplotlib.figure import Figure

CLASS_COLOURS = {"unsafe": "#c0392b", "safe": "#2471a3"}
CLASS_TITLES = {"unsafe": "unsafe prompts (false allows)", "safe": "safe prompts (false blocks)"}
STATUS_COLOURS = {"bypass_found": "#c0392b", "no_bypass_found": "#27ae60", "incomplete": "#7e5109",
                  None: "#e5e7e9"}
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")


@dataclass(frozen=True)
class CurveSeries:
    """One guard's RA curves: `ra[label]` at `budgets`, `bands[label] = (low, high)`."""

    name: str
    budgets: tuple[float, ...]
    ra: Mapping[str, Sequence[float]]
    bands: Mapping[str, tuple[Sequence[float], Sequence[float]]] = field(default_factory=dict)

    @classmethod
    def from_record(cls, record: Record) -> CurveSeries:
        """A snapshot record's curves (bands included when present), named by its guard."""
        return cls.from_curves(record.curves, record.id)

    @classmethod
    def from_curves(cls, curves: Curves, name: str) -> CurveSeries:
        ra = {label: tuple(values) for label in CLASS_COLOURS if (values := getattr(curves, label)) is not None}
        bands = {label: (tuple(band.low), tuple(band.high)) for label, band in curves.bands.items()}
        return cls(name, tuple(curves.budgets), ra, bands)


def _new_figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=120, layout="constrained")


def save(fig: Figure, stem: Path) -> list[Path]:
    """Write `stem`.png and `stem`.svg; returns both paths."""
    import matplotlib
    from matplotlib.text import Text

    # Ids in titles and legends show control characters as <U+XXXX>: the SVG stays well-formed XML.
    for text in fig.findobj(Text):
        shown = make_visible(text.get_text())
        if shown != text.get_text():
            text.set_text(shown)

    png, svg = stem.parent / f"{stem.name}.png", stem.parent / f"{stem.name}.svg"
    # Each file whole or not at all (a full disk leaves the old one, never an empty one), and
    # a link at its name is replaced, never written through.
    with matplotlib.rc_context({"svg.hashsalt": "margin", "svg.fonttype": "path"}):
        with atomic_file(png, "wb") as handle:
            fig.savefig(handle, format="png", metadata={"Software": None})
        with atomic_file(svg, "wb") as handle:
            fig.savefig(handle, format="svg", metadata={"Date": None, "Creator": None})
    return [png, svg]


def curves_figure(series: Sequence[CurveSeries], title: str = "") -> Figure:
    """Robust accuracy against budget, one panel per class, every guard on the same axes."""
    fig = _new_figure(10, 4.2)
    axes = fig.subplots(1, 2, sharey=True)
    for ax, label in zip(axes, CLASS_COLOURS, strict=True):
        for index, s in enumerate(series):
            if label not in s.ra:
                continue
            colour = CLASS_COLOURS[label] if len(series) == 1 else PALETTE[index % len(PALETTE)]
            ax.step(s.budgets, s.ra[label], where="post", color=colour, label=s.name, linewidth=1.6)
            if label in s.bands:
                low, high = s.bands[label]
                ax.fill_between(s.budgets, low, high, step="post", color=colour, alpha=0.18,
                                linewidth=0)
        ax.set_title(CLASS_TITLES[label])
        ax.set_xlabel("budget b (edits per 100 original characters)")
        ax.set_ylim(-0.02, 1.02)
        if series:
            ax.set_xlim(min(s.budgets[0] for s in series), max(s.budgets[-1] for s in series))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("robust accuracy RA(b)")
    labelled = [ax for ax in axes if ax.get_legend_handles_labels()[0]]
    if labelled:  # a single-class dataset leaves one panel empty
        labelled[-1].legend(loc="upper right", fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


def fpr_fnr_figure(points: Sequence[tuple[str, float | None, float | None]], title: str = "") -> Figure:
    """One point per guard: mean FPR (false blocks) on x, mean FNR (false allows) on y."""
    fig = _new_figure(5.5, 5)
    ax = fig.subplots()
    for index, (name, fpr, fnr) in enumerate(points):
        if fpr is None or fnr is None:
            continue
        ax.scatter([fpr], [fnr], color=PALETTE[index % len(PALETTE)], s=40, zorder=3)
        ax.annotate(name, (fpr, fnr), textcoords="offset points", xytext=(5, 4), fontsize="small")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("FPR: safe prompts blocked (mean over datasets)")
    ax.set_ylabel("FNR: unsafe prompts allowed (mean over datasets)")
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.set_title(title or "FPR vs FNR (closer to the origin is better)")
    return fig


def heatmap_figure(rows: Sequence[str], columns: Sequence[str],
                   values: Sequence[Sequence[float | None]], title: str = "",
                   value_label: str = "flip rate") -> Figure:
    """A rows x columns grid of shares 0..1 (None: not measured, shown grey), annotated."""
    import numpy as np

    grid = np.array([[math.nan if v is None else v for v in row] for row in values], dtype=float)
    grid = grid.reshape(len(rows), len(columns))
    fig = _new_figure(max(4.0, 1.0 + 0.9 * len(columns)), max(2.5, 0.8 + 0.32 * len(rows)))
    ax = fig.subplots()
    masked = np.ma.masked_invalid(grid)
    import matplotlib

    cmap = matplotlib.colormaps["Reds"].with_extremes(bad="#e5e7e9")
    image = ax.imshow(masked, cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(columns)):
            if not math.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize="x-small",
                        color="white" if grid[i, j] > 0.6 else "black")
    ax.set_xticks(range(len(columns)), list(columns), rotation=30, ha="right", fontsize="small")
    ax.set_yticks(range(len(rows)), list(rows), fontsize="small")
    fig.colorbar(image, ax=ax, label=value_label)
    if title:
        ax.set_title(title)
    return fig


def pairing_matrix_figure(pairings: Pairings, title: str = "") -> Figure:
    """Guards (rows) x protected models (columns): bypass found, none found, incomplete or untested."""
    from matplotlib.patches import Patch, Rectangle

    guards = pairings.meta.guards
    models = model_order(pairings.meta.models)
    cells = {(d.guard_id, d.model_id): d for d in pairings.data}
    fig = _new_figure(max(4.0, 1.8 + 0.75 * len(models)), max(2.5, 1.6 + 0.42 * len(guards)))
    ax = fig.subplots()
    for i, guard in enumerate(guards):
        for j, model in enumerate(models):
            cell = cells.get((guard.id, model.id))
            status = cell.shown_status() if cell else None
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=STATUS_COLOURS[status],
                                   edgecolor="white", linewidth=2))
            if cell:
                ax.text(j, i, f"{cell.qualifying_transformations}/{cell.transformations_tested}",
                        ha="center", va="center", fontsize="x-small", color="white")
    ax.set_xlim(-0.5, len(models) - 0.5)
    ax.set_ylim(len(guards) - 0.5, -0.5)
    labels = [f"{_shown_name(m)}\nindex {'?' if 'capability_index' not in m.model_fields_set else m.capability_index}"
              for m in models]
    ax.set_xticks(range(len(models)), labels, rotation=40, ha="right", fontsize="x-small")
    ax.set_yticks(range(len(guards)), [_shown_name(g) for g in guards], fontsize="small")
    ax.legend(handles=[Patch(color=STATUS_COLOURS["bypass_found"], label="bypass found"),
                       Patch(color=STATUS_COLOURS["no_bypass_found"], label="none found"),
                       Patch(color=STATUS_COLOURS["incomplete"], label="incomplete"),
                       Patch(color=STATUS_COLOURS[None], label="not tested")],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.set_title(title or "guard x model: qualifying / tested transformations")
    return fig


def capability_ladder_figure(pairings: Pairings, guard_id: str | None = None,
                             title: str = "") -> Figure:
    """Each tested model at (weight size, capability index), coloured by the share of guards
    (or the one `guard_id`) with a bypass found for it. Models lacking either axis are left out."""
    fig = _new_figure(6.5, 4.8)
    ax = fig.subplots()
    import matplotlib

    cmap = matplotlib.colormaps["RdYlGn_r"]
    rows = [d for d in pairings.data if (guard_id is None or d.guard_id == guard_id) and d.measured()]
    for model in model_order(pairings.meta.models):
        size, index = model.parameters_b, model.capability_index
        tested = [d for d in rows if d.model_id == model.id]
        if size is None or index is None or not tested:
            continue
        share = sum(d.status == "bypass_found" for d in tested) / len(tested)
        ax.scatter([size], [index], color=cmap(share), s=70, edgecolor="black", linewidth=0.5, zorder=3)
        ax.annotate(_shown_name(model), (size, index), textcoords="offset points",
                    xytext=(5, 4), fontsize="x-small")
    ax.set_xscale("log")
    ax.set_xlabel("weight size (billions of parameters, log scale)")
    ax.set_ylabel("capability index")
    ax.grid(alpha=0.3, which="both")
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    fig.colorbar(ScalarMappable(norm=Normalize(0, 1), cmap=cmap), ax=ax,
                 label="share of guards with a bypass found" if guard_id is None else "bypass found")
    ax.set_title(title or ("capability ladder" + (f": {guard_id}" if guard_id else "")))
    return fig


def _shown_name(entity: Entity) -> str:
    """A guard's or model's name as the plots have always shown it: the name where the
    pairings give one (even null), else the id."""
    return str(entity.name if "name" in entity.model_fields_set else entity.id)


ABLATION_FIGURES = (("balanced_margin", "balanced margin", "#444444"),
                    ("unsafe_margin", "unsafe margin", CLASS_COLOURS["unsafe"]),
                    ("safe_margin", "safe margin", CLASS_COLOURS["safe"]),
                    ("clean_balanced_accuracy", "clean balanced accuracy %", "#9b59b6"))


def ablation_figure(defences: Sequence[DefenceRecord], title: str = "") -> Figure:
    """Per defence (an `ablation.json` entry, read into its model): the margins and clean balanced accuracy with their
    95% intervals, and their change against no defence with the paired 95% interval (a margin
    gained by blocking less shows beside the accuracy it costs)."""
    fig = _new_figure(max(7.0, 2.5 + 1.3 * len(defences)), 4.4)
    axes = fig.subplots(1, 2)
    width = 0.8 / len(ABLATION_FIGURES)
    for ax, change in zip(axes, (False, True), strict=True):
        for k, (figure, label, colour) in enumerate(ABLATION_FIGURES):
            offset = (k - (len(ABLATION_FIGURES) - 1) / 2) * width
            xs, ys, below, above = [], [], [], []
            for i, defence in enumerate(defences):
                value, interval = defence.point(figure, change)
                if value is None:
                    continue
                xs.append(i + offset)
                ys.append(value)
                below.append(value - interval[0] if interval else 0.0)
                above.append(interval[1] - value if interval else 0.0)
            ax.errorbar(xs, ys, yerr=[below, above], fmt="o", color=colour, label=label, capsize=3,
                        markersize=4, linewidth=1.2)
        ax.set_xticks(range(len(defences)), [d.defence for d in defences], rotation=30, ha="right",
                      fontsize="small")
        ax.grid(alpha=0.3, axis="y")
    axes[0].set_ylabel("margin, or accuracy in % (0-100)")
    axes[0].set_title("margins and clean accuracy [95% CI]")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside lower center", ncols=len(ABLATION_FIGURES),
               fontsize="small")
    axes[1].axhline(0.0, color="#888888", linewidth=0.8)
    axes[1].set_ylabel("defence minus none")
    axes[1].set_title("change against none [paired 95% CI]")
    if title:
        fig.suptitle(title)
    return fig
