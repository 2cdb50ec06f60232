"""Best-of-N (`--search bon`): attack success against guard calls, and a power-law forecast.

    python benchmarks/bon.py --guard minilm --sample 60 --max-calls 101 --json runs/bon.json

On the same fixed sample as `single_edit.py` (of the prompts the guard gets right, `--sample`
evenly spaced ones), each prompt gets up to `--max-calls` calls (the original and N = max-calls
- 1 samples) and stops at its first flip, so ASR(n), the share of prompts flipped within n
samples, is read off each result's guard calls. Following Hughes et al. 2024, -log ASR(n) =
a n^-b is fitted (least squares on log(-log ASR) against log n) on the first tenth of the
samples and forecasts ASR at N, beside the ASR measured there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.single_edit import sample  # noqa: E402
from margin.guards.make import load_guard  # noqa: E402
from margin.runs.executing.execute import execute  # noqa: E402
from margin.runs.preparing.config import RunConfig  # noqa: E402
from margin.runs.preparing.prepare import prepare  # noqa: E402


def asr_curve(samples_to_flip: list[int | None], n_max: int) -> list[float]:
    """ASR(n) for n = 1..n_max: the share of prompts whose first flip came within n samples."""
    total = len(samples_to_flip)
    return [sum(1 for s in samples_to_flip if s is not None and s <= n) / total for n in range(1, n_max + 1)]


def fit_power_law(curve: list[float]) -> tuple[float, float] | None:
    """(a, b) of -log ASR(n) = a n^-b over the points with 0 < ASR < 1 (n = 1, 2, ...)."""
    points = [(math.log(n), math.log(-math.log(asr))) for n, asr in enumerate(curve, 1) if 0 < asr < 1]
    if len(points) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return math.exp(my - slope * mx), -slope


def forecast(a: float, b: float, n: int) -> float:
    return math.exp(-a * n ** -b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guard", default="minilm")
    parser.add_argument("--sample", type=int, default=60)
    parser.add_argument("--max-calls", type=int, default=101)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    config = RunConfig.of(guard=args.guard, dataset="xstest", search="bon", max_calls=args.max_calls, seed=args.seed,
                       batch_size=256, engine="local")
    prepared = prepare(config)
    guard = load_guard(args.guard)
    chosen = sample(list(prepared.prompts), guard.classify([p.text for p in prepared.prompts]), args.sample)
    prepared = dataclasses.replace(prepared, prompts=tuple(chosen))
    with tempfile.TemporaryDirectory() as folder:
        outcome = execute(prepared, Path(folder) / "run")
    n_max = args.max_calls - 1
    report: dict[str, Any] = {"guard": args.guard, "sample": len(chosen), "samples_per_prompt": n_max}
    for label in ("unsafe", "safe"):
        rows = [r for r in outcome.results if r.label == label and r.status == "scored"]
        to_flip = [r.guard_calls - 1 if r.flip is not None else None for r in rows]
        curve = asr_curve(to_flip, n_max)
        fitted = fit_power_law(curve[: max(2, n_max // 10)])
        report[label] = {
            "prompts": len(rows), "broken": sum(1 for s in to_flip if s is not None),
            "asr_at": {str(n): curve[n - 1] for n in (1, 2, 5, 10, 20, 50, n_max) if n <= n_max},
            "calls_per_success": (sum(r.guard_calls for r in rows) / max(1, sum(1 for s in to_flip if s is not None))),
            "mean_cost": (sum(r.flip_cost for r in rows if r.flip) / max(1, sum(1 for r in rows if r.flip))),
            "fit_on_first_tenth": None if fitted is None else {
                "a": fitted[0], "b": fitted[1], "forecast_at_n_max": forecast(*fitted, n_max)},
            "measured_at_n_max": curve[-1],
        }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
