"""Adaptive search against the exact optimum: prompts broken, cost, guard calls per success.

    python benchmarks/adaptive.py                              # keyword guard, XSTest
    python benchmarks/adaptive.py --guard python:tests/support/lexicon_guards.py:SubstringLexiconGuard
    python benchmarks/adaptive.py --guard GUARD --standard     # any guard; adds standard vs adaptive margins
    python benchmarks/adaptive.py --no-prior                   # without the probe-word prior
    python benchmarks/adaptive.py --guard minilm --limit 60    # a cheap subset: a stratified sample of 60

For a guard with `triggers(text)` (a lexicon guard) the exact optimum of every unsafe prompt
it catches is known (`margin.search.optimum`), and for the `keyword` guard that of every
safe prompt it passes too. Goals (issue 8): every prompt the optimum breaks is broken, mean
cost within 5% of the optimum, at most 10 guard calls per success on average. Costs are in
margin's units (corpus norm); one edit on XSTest costs 100 / 44.23 = 2.26.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from margin.guards.keyword import KeywordGuard  # noqa: E402
from margin.guards.make import load_guard  # noqa: E402
from margin.reports.gap import suite_gap  # noqa: E402
from margin.runs.executing.execute import execute  # noqa: E402
from margin.runs.preparing.config import RunConfig  # noqa: E402
from margin.runs.preparing.prepare import PreparedRun, prepare  # noqa: E402
from margin.search.optimum import keyword_regions, safe_optimum, substring_regions, unsafe_optimum  # noqa: E402
from margin.types import Prompt  # noqa: E402

EPS = 1e-9


class WithoutPrior(PreparedRun):
    """The prepared run, its adaptive searches ranking words without the probe-word prior."""

    def search_options(self, prompt: Prompt) -> dict[str, Any]:
        return {**super().search_options(prompt), "prior": False}


def run(guard_spec: str, dataset: str, search: str, max_calls: int | None, seed: int, prior: bool,
        limit: int | None = None, one_edit: str | None = None) -> Any:
    adaptive = search == "adaptive"
    config = RunConfig.of(guard=guard_spec, dataset=dataset, search=search, seed=seed, limit=limit,
                       max_calls=max_calls if adaptive else None, one_edit=one_edit if adaptive else None,
                       batch_size=256)
    prepared = prepare(config)
    if not prior:  # ablation: rank words without the probe-word prior
        prepared = WithoutPrior(*(getattr(prepared, f.name) for f in dataclasses.fields(prepared)))
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        outcome = execute(prepared, Path(folder) / "run")
        outcome.extra["wall_s"] = time.perf_counter() - started
    return prepared, outcome


def figures(label: str, results: list[Any], optima: dict[str, Any] | None, unit: float) -> dict[str, Any]:
    """Prompts of `label` the guard gets right, against their optima where known."""
    rows = [r for r in results if r.label == label and r.status == "scored" and r.clean_verdict == label]
    broken = [r for r in rows if r.flip is not None]
    calls = sum(r.guard_calls for r in rows)
    out: dict[str, Any] = {
        "prompts": len(rows),
        "broken": len(broken),
        "mean_cost": _mean([r.flip_cost for r in broken]),
        "mean_edits": _mean([r.flip_cost / unit for r in broken]),
        "guard_calls": calls,
        "calls_per_success": calls / len(broken) if broken else None,
    }
    if optima is not None:
        exact = [r for r in rows if optima[r.prompt_id].exact and optima[r.prompt_id].edits > 0]
        hit = [r for r in exact if r.flip is not None]
        out.update({
            "optimum_exact": len(exact),
            "optimum_breaks": len(exact),
            "optimum_edits": _histogram([optima[r.prompt_id].edits for r in exact]),
            "optimum_mean_cost": _mean([optima[r.prompt_id].cost for r in exact]),
            "broken_of_optimum": len(hit),
            "at_optimum": sum(1 for r in hit if abs(r.flip_cost - optima[r.prompt_id].cost) < EPS),
            "adaptive_mean_cost_where_optimum": _mean([r.flip_cost for r in hit]),
            "cost_over_optimum": (_mean([r.flip_cost for r in hit]) / _mean([optima[r.prompt_id].cost for r in hit])
                                  if hit else None),
            "below_optimum": sum(1 for r in hit if r.flip_cost < optima[r.prompt_id].cost - EPS),
        })
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _histogram(values: list[int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in sorted(values):
        out[str(v)] = out.get(str(v), 0) + 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guard", default="keyword")
    parser.add_argument("--dataset", default="xstest",
                        help="sample | xstest (the pinned file; $MARGIN_XSTEST names a local copy) | PATH")
    parser.add_argument("--max-calls", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--standard", action="store_true", help="also run the standard suite (cheapest) and compare margins")
    parser.add_argument("--no-prior", action="store_true", help="rank words without the probe-word prior")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here too")
    parser.add_argument("--one-edit", default=None, choices=("guided", "all", "none"),
                        help="as margin run --one-edit (all: every cost certified among one-edit flips)")
    parser.add_argument("--limit", type=int, default=None,
                        help="a stratified sample of N prompts, as margin run --limit (costs keep the whole corpus's units)")
    args = parser.parse_args()

    prepared, outcome = run(args.guard, args.dataset, "adaptive", args.max_calls, args.seed, not args.no_prior,
                            args.limit, args.one_edit)
    guard = load_guard(args.guard)
    model = prepared.cost_model
    unit = model.cost("x" * 10, "x" * 11) if model.norm == "corpus" else 1.0
    texts = {p.id: p.text for p in prepared.prompts}
    report: dict[str, Any] = {"guard": guard.info.id, "dataset": prepared.dataset.name, "seed": args.seed,
                              "prompts": len(prepared.prompts),
                              "max_calls": prepared.search_options(prepared.prompts[0])["max_calls"],
                              "prior": not args.no_prior, "one_edit_cost": unit,
                              "one_edit": args.one_edit or "guided",
                              "wall_s": outcome.extra["wall_s"], "guard_calls": outcome.guard_calls}
    unsafe_optima = safe_optima = None
    lexicon = getattr(guard, "impl", guard)  # a python:FILE:Class guard wraps its object
    if callable(getattr(lexicon, "triggers", None)):
        keyword = isinstance(lexicon, KeywordGuard)
        regions = keyword_regions if keyword else substring_regions
        unsafe_optima = {r.prompt_id: unsafe_optimum(lexicon, texts[r.prompt_id], model, regions=regions)
                         for r in outcome.results if r.label == "unsafe"}
        if keyword:
            safe_optima = {r.prompt_id: safe_optimum(lexicon, texts[r.prompt_id], model)
                           for r in outcome.results if r.label == "safe"}
    report["unsafe"] = figures("unsafe", outcome.results, unsafe_optima, unit)
    report["safe"] = figures("safe", outcome.results, safe_optima, unit)
    if safe_optima is not None:
        ones = [r for r in outcome.results if r.label == "safe" and r.clean_verdict == "safe"
                and safe_optima[r.prompt_id].edits == 1]
        report["safe"]["one_edit_from_unsafe"] = len(ones)
        report["safe"]["one_edit_found"] = sum(1 for r in ones if r.flip is not None and r.flip_cost <= unit + EPS)
    report["adaptive_margins"] = _margins(outcome.report)
    if args.standard:
        _, standard = run(args.guard, args.dataset, "cheapest", None, args.seed, True, args.limit)
        gaps = [row for row in suite_gap(standard.results, outcome.results) if row.gap is not None]
        report["standard_margins"] = _margins(standard.report)
        report["standard_guard_calls"] = standard.guard_calls
        report["gap"] = {label: {"prompts": len(rs), "adaptive_cheaper": sum(1 for g in rs if g.gap > EPS),
                                 "mean_gap": _mean([g.gap for g in rs])}
                         for label in ("unsafe", "safe") for rs in [[g for g in gaps if g.label == label]]}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


def _margins(report: Any) -> dict[str, Any]:
    return {"balanced": report.balanced_margin, "unsafe": report.unsafe_margin, "safe": report.safe_margin}


if __name__ == "__main__":
    main()
