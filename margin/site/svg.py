"""SVG drawn from a snapshot's own numbers: robust-accuracy curves with their Wilson bands,
and the capability ladder. Pure functions from data to markup; every text is escaped here.

Curves are right-continuous steps: RA(b) = the value at the last breakpoint <= b, so the
drawn line is flat from each breakpoint to the next and the area under it, over [0, B],
is B * margin / 100 (the snapshot's own identity; tests/site/test_site.py measures it on the path).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape as escape_html
from typing import Any

from margin.reports.snapshot_schema import Curves
from margin.util.display import make_visible

CLASS_COLOURS = {"unsafe": "#b03a2e", "safe": "#1f618d"}
CLASS_NAMES = {"unsafe": "unsafe prompts (false allows)", "safe": "safe prompts (false blocks)"}
GREEN, AMBER, RED = (39, 174, 96), (230, 126, 34), (176, 58, 46)


def escape(text: str) -> str:
    """A text for SVG markup: control and bidi characters visible, then HTML-escaped."""
    return escape_html(make_visible(text))


@dataclass(frozen=True)
class Frame:
    """The plot area inside an SVG of `width` x `height`, and the data ranges it maps."""

    width: float
    height: float
    left: float
    right: float
    top: float
    bottom: float
    x0: float
    x1: float
    y0: float
    y1: float
    log_x: bool = False

    @property
    def inner(self) -> tuple[float, float, float, float]:
        """x, y, width, height of the plot area."""
        return (self.left, self.top, self.width - self.left - self.right, self.height - self.top - self.bottom)

    def x(self, value: float) -> float:
        lo, hi, v = self.x0, self.x1, value
        if self.log_x:
            lo, hi, v = math.log10(lo), math.log10(hi), math.log10(value)
        px, _, pw, _ = self.inner
        return px + (v - lo) / (hi - lo) * pw

    def y(self, value: float) -> float:
        _, py, _, ph = self.inner
        return py + ph - (value - self.y0) / (self.y1 - self.y0) * ph


def _n(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def step_points(budgets: Sequence[float], values: Sequence[float]) -> list[tuple[float, float]]:
    """The corners of a right-continuous step curve, in data units, from budgets[0] to budgets[-1]."""
    points = [(budgets[0], values[0])]
    for k in range(1, len(budgets)):
        points += [(budgets[k], values[k - 1]), (budgets[k], values[k])]
    return points


def _path(frame: Frame, points: Sequence[tuple[float, float]], close: bool = False) -> str:
    d = " ".join(f"{'M' if i == 0 else 'L'}{_n(frame.x(b))},{_n(frame.y(v))}" for i, (b, v) in enumerate(points))
    return d + (" Z" if close else "")


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, k = [], 0
    while first + k * step <= hi + 1e-9 * step:
        ticks.append(round(first + k * step, 10))
        k += 1
    return ticks


def _axes(frame: Frame, xticks: Sequence[float], yticks: Sequence[float], xlabel: str, ylabel: str,
          xfmt: Any = _n, yfmt: Any = _n) -> list[str]:
    px, py, pw, ph = frame.inner
    out = [f'<rect class="plot-area" x="{_n(px)}" y="{_n(py)}" width="{_n(pw)}" height="{_n(ph)}"/>']
    for t in xticks:
        x = _n(frame.x(t))
        out.append(f'<line class="grid" x1="{x}" x2="{x}" y1="{_n(py)}" y2="{_n(py + ph)}"/>')
        out.append(f'<text class="tick" x="{x}" y="{_n(py + ph + 16)}" text-anchor="middle">{escape(xfmt(t))}</text>')
    for t in yticks:
        y = _n(frame.y(t))
        out.append(f'<line class="grid" x1="{_n(px)}" x2="{_n(px + pw)}" y1="{y}" y2="{y}"/>')
        out.append(f'<text class="tick" x="{_n(px - 6)}" y="{y}" dy="0.32em" text-anchor="end">{escape(yfmt(t))}</text>')
    out.append(f'<text class="axis-label" x="{_n(px + pw / 2)}" y="{_n(frame.height - 6)}" '
               f'text-anchor="middle">{escape(xlabel)}</text>')
    out.append(f'<text class="axis-label" transform="translate(14 {_n(py + ph / 2)}) rotate(-90)" '
               f'text-anchor="middle">{escape(ylabel)}</text>')
    return out


def curves_svg(curves: Curves, budget: float, *, title: str, ident: str,
               margins: Mapping[str, float | None] | None = None) -> str:
    """One guard's robust-accuracy curves (one per class present) with their bands, on [0, B] x [0, 1]."""
    frame = Frame(560, 316, 52, 16, 30, 44, 0.0, float(budget), 0.0, 1.0)
    budgets = [float(b) for b in curves.budgets]
    series = {label: values for label in CLASS_COLOURS if (values := getattr(curves, label)) is not None}
    labels = list(series)
    margins = margins or {}
    described = "; ".join(
        f"{CLASS_NAMES[label]}: {_n(100 * series[label][0])}% right on the originals"
        + (f", margin {margins[label]:.2f}" if margins.get(label) is not None else "")
        for label in labels)
    parts = [f'<svg class="curves" id="{escape(ident)}" viewBox="0 0 {frame.width:g} {frame.height:g}" role="img" '
             f'aria-labelledby="{escape(ident)}-title {escape(ident)}-desc" data-budget="{budget:g}">',
             f'<title id="{escape(ident)}-title">{escape(title)}</title>',
             f'<desc id="{escape(ident)}-desc">Robust accuracy against cost budget, 0 to {budget:g}. '
             f'{escape(described)}.</desc>']
    parts += _axes(frame, nice_ticks(0, budget), [0, 0.25, 0.5, 0.75, 1.0],
                   "cost budget b (edits per 100 original characters)", "robust accuracy")
    for label in labels:
        band = curves.bands.get(label)
        if band is not None:
            upper = step_points(budgets, band.high)
            lower = step_points(budgets, band.low)
            parts.append(f'<path class="band band-{label}" fill="{CLASS_COLOURS[label]}" '
                         f'd="{_path(frame, upper + lower[::-1], close=True)}"/>')
    for label in labels:
        parts.append(f'<path class="curve curve-{label}" stroke="{CLASS_COLOURS[label]}" data-class="{label}" '
                     f'd="{_path(frame, step_points(budgets, series[label]))}"/>')
    px, _, _, _ = frame.inner
    for k, label in enumerate(labels):  # the legend, in a row above the plot
        x = px + 230 * k
        parts.append(f'<line x1="{_n(x)}" x2="{_n(x + 22)}" y1="12" y2="12" stroke="{CLASS_COLOURS[label]}" '
                     'stroke-width="2.5"/>')
        parts.append(f'<text class="key" x="{_n(x + 28)}" y="12" dy="0.32em">{escape(CLASS_NAMES[label])}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def share_colour(share: float) -> str:
    """Green (no guard bypassed) through amber to red (every guard bypassed)."""
    a, b, t = (GREEN, AMBER, share * 2) if share <= 0.5 else (AMBER, RED, share * 2 - 1)
    return "#" + "".join(f"{round(a[i] + (b[i] - a[i]) * t):02x}" for i in range(3))


@dataclass(frozen=True)
class LadderPoint:
    model_id: str
    name: str
    parameters_b: float
    capability_index: float
    bypassed: int
    tested: int

    @property
    def share(self) -> float:
        return self.bypassed / self.tested

    @property
    def label(self) -> str:
        return (f"{self.name}: {self.parameters_b:g}B parameters, capability index {self.capability_index:g}; "
                f"bypass found for {self.bypassed} of {self.tested} guard{'s' if self.tested != 1 else ''}")


def ladder_svg(points: Sequence[LadderPoint], *, ident: str = "ladder") -> str:
    """Each tested model at (weight size, log scale; capability index), coloured by the share of
    guards with a bypass found. Each point is focusable and names itself on hover and focus."""
    sizes = [p.parameters_b for p in points]
    indices = [p.capability_index for p in points]
    x0, x1 = 10 ** math.floor(math.log10(min(sizes))), 10 ** math.ceil(math.log10(max(sizes)))
    if x1 <= x0:
        x1 = x0 * 10
    ys = nice_ticks(min(indices), max(indices)) if max(indices) > min(indices) else [min(indices) - 1, min(indices) + 1]
    y0, y1 = min(ys[0], min(indices)), max(ys[-1], max(indices))
    pad = (y1 - y0) * 0.08
    frame = Frame(560, 356, 52, 24, 34, 44, x0, x1, y0 - pad, y1 + pad, log_x=True)
    xticks = [10.0 ** e for e in range(round(math.log10(x0)), round(math.log10(x1)) + 1)]
    parts = [f'<svg class="ladder" id="{escape(ident)}" viewBox="0 0 {frame.width:g} {frame.height:g}" role="group" '
             f'aria-labelledby="{escape(ident)}-title">',
             f'<title id="{escape(ident)}-title">Capability ladder: tested models by weight size and capability '
             f'index, coloured by the share of guards with a bypass found</title>']
    parts += _axes(frame, xticks, [t for t in ys if y0 - pad <= t <= y1 + pad],
                   "weight size (billions of parameters, log scale)", "capability index",
                   xfmt=lambda t: f"{t:g}")
    for k, (share, text) in enumerate(((0.0, "no guard bypassed"), (0.5, "half the guards"), (1.0, "every guard"))):
        left = frame.left + 150 * k
        parts.append(f'<circle cx="{_n(left + 6)}" cy="14" r="6" fill="{share_colour(share)}" stroke="#1c2833"/>'
                     f'<text class="key" x="{_n(left + 17)}" y="14" dy="0.32em">{text}</text>')
    for p in sorted(points, key=lambda p: (p.capability_index, p.parameters_b, p.model_id)):
        x, y = _n(frame.x(p.parameters_b)), _n(frame.y(p.capability_index))
        anchor = "end" if frame.x(p.parameters_b) > frame.width * 0.7 else "start"
        dx = "-9" if anchor == "end" else "9"
        parts.append(f'<g class="point" tabindex="0" role="img" aria-label="{escape(p.label)}" '
                     f'data-model="{escape(p.model_id)}" data-share="{p.share:g}">'
                     f'<title>{escape(p.label)}</title>'
                     f'<circle cx="{x}" cy="{y}" r="7" fill="{share_colour(p.share)}"/>'
                     f'<text class="point-label" x="{x}" y="{y}" dx="{dx}" dy="-9" text-anchor="{anchor}">'
                     f'{escape(p.name)}</text></g>')
    parts.append("</svg>")
    return "\n".join(parts)
