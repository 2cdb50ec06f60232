"""Response cases beside prompt cases: the search's guard calls per case and the driver's
throughput (issue 32, speed).

    python -m benchmarks.responses --responses PATH [--dataset xstest] [--limit N]
                                   [--suite standard] [--batch-size 64] [--json OUT]

PATH is a labelled-completions file (XSTest's `model_completions/` CSVs), loaded as response
cases as `margin run --target response` loads it; `--dataset` gives the prompt cases. For each
kind (`--limit`: a stratified sample of N cases of each), `cheapest` with the verdict cache
off, the guard called inline in the engine loop's thread (`benchmarks.run.InlinePool`), in
this process. Three runs: prompt cases and response cases with the keyword guard (which sees
the target text), and response cases with the same verdicts from a guard that sees whole cases
(`benchmarks/case_keyword.py`), as the model guards that render conversations do. Figures:

- the mean target length in characters, and the suite's candidates per case;
- guard calls per case (texts sent per case) and the exact lower bound per case
  (`benchmarks.run.lower_bound`): a response is longer, so an edit costs less per 100
  characters, and more candidates fit under the budget;
- the driver's throughput: candidates per CPU second of its own (this process's CPU time
  less the guard calls'; CPU time, so that other jobs on a shared machine move it less than
  wall time);
- the guard calls' make-up for the guard that sees whole cases: distinct cases per call (what
  a backend that reuses each case's own prefix groups a call by).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.run import InlinePool, lower_bound
from margin.engine.calls import call_batch
from margin.guards.make import build_guard, parse_guard_spec
from margin.runs.executing.single import search as run_search
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare
from margin.types import Exchange

CASE_KEYWORD = f"python:{Path(__file__).resolve().parent / 'case_keyword.py'}:CaseKeyword"


class CountingPool(InlinePool):
    """InlinePool that also counts the distinct cases in each guard call (whole cases only)
    and the CPU time the guard calls take."""

    def __init__(self, guard: Any, batch_size: int) -> None:
        super().__init__(guard, batch_size)
        self.cases_per_call: list[int] = []
        self.guard_cpu_s = 0.0
        self.calls = 0

    def dispatch(self, book: Any, now: float) -> None:
        while not self.done and (tickets := book.take(self.name, self.figures.capacity)):
            requests = [t.request for t in tickets]
            self.calls += 1
            if all(isinstance(r, Exchange) for r in requests):
                self.cases_per_call.append(len({r.messages[:-1] for r in requests}))
            began = time.process_time()
            self.done.append((tickets, call_batch(self.caller, requests)))
            self.guard_cpu_s += time.process_time() - began
            self.notify(None)


def kind_figures(args: argparse.Namespace, guard: str, dataset: str, target: str, work: Path) -> dict[str, Any]:
    spec = parse_guard_spec(guard)
    config = RunConfig.of(spec, dataset=dataset, suite=args.suite, search="cheapest", cache=False,
                          batch_size=args.batch_size, engine="local", target=target, limit=args.limit)
    prepared = prepare(config)
    pool = CountingPool(build_guard(spec), args.batch_size)
    began = time.process_time()
    searched = run_search(prepared, work / f"{target}-{len(os.listdir(work))}", pool=pool)
    cpu = time.process_time() - began - pool.guard_cpu_s
    by_id = {p.id: p for p in prepared.prompts}
    scored = [r for r in searched.results if r.status == "scored"]
    candidates = {r.prompt_id: prepared.candidates(by_id[r.prompt_id]).all() for r in scored}
    cases = len(prepared.prompts)
    return {"target": target, "guard": prepared.info.id, "sees": prepared.shapes.sees,
            "dataset": prepared.dataset.name, "cases": cases, "scored": len(scored),
            "mean_target_chars": sum(len(p.text) for p in prepared.prompts) / cases,
            "candidates_per_case": sum(len(c) for c in candidates.values()) / len(scored),
            "guard_calls": searched.guard_calls, "calls_per_case": searched.guard_calls / cases,
            "lower_bound_per_case": sum(lower_bound(candidates[r.prompt_id], r) for r in scored) / len(scored),
            "driver_cpu_s": cpu, "guard_cpu_s": pool.guard_cpu_s, "candidates_per_cpu_s": searched.guard_calls / cpu,
            "calls": pool.calls,
            "cases_per_call": sum(pool.cases_per_call) / len(pool.cases_per_call) if pool.cases_per_call else None}


def show(rows: list[dict[str, Any]]) -> None:
    print(f"{'target':9} {'guard sees':11} {'cases':>6} {'chars':>6} {'cand/case':>9} {'calls/case':>10} "
          f"{'bound/case':>10} {'driver cand/CPU s':>17} {'cases/call':>10}")
    for r in rows:
        per_call = "" if r["cases_per_call"] is None else f"{r['cases_per_call']:10.1f}"
        print(f"{r['target']:9} {r['sees']:11} {r['cases']:6} {r['mean_target_chars']:6.0f} "
              f"{r['candidates_per_case']:9.1f} {r['calls_per_case']:10.1f} {r['lower_bound_per_case']:10.1f} "
              f"{r['candidates_per_cpu_s']:17,.0f} {per_call:>10}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--responses", required=True, help="a labelled-completions CSV (response cases)")
    parser.add_argument("--dataset", default="xstest",
                        help="the prompt cases: sample | xstest (the pinned file; $MARGIN_XSTEST names a local copy) | PATH")
    parser.add_argument("--limit", type=int, default=None, help="a stratified sample of N cases of each kind")
    parser.add_argument("--suite", default="standard")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with tempfile.TemporaryDirectory(prefix="margin-responses-") as tmp:
        rows = []
        for guard, dataset, target in (("keyword", args.dataset, "prompt"), ("keyword", args.responses, "response"),
                                       (CASE_KEYWORD, args.responses, "response")):
            rows.append(kind_figures(args, guard, dataset, target, Path(tmp)))
            rows[-1]["load_average"] = os.getloadavg()[0]
    show(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
