"""Plots from reports: robust-accuracy curves (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

from margin.types import Curve

CLASS_COLOURS = {"unsafe": "#c0392b", "safe": "#2471a3"}


def plot_curves(curve: Curve, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=120)
    for label, values in curve.ra.items():
        ax.step(curve.budgets, values, where="post", label=f"{label} prompts",
                color=CLASS_COLOURS.get(label))
    ax.set_xlabel("budget b (edits per 100 original characters)")
    ax.set_ylabel("robust accuracy RA(b)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlim(curve.budgets[0], curve.budgets[-1])
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    # A fixed date keeps the PNG free of a timestamp.
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
