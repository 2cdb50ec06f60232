"""margin's speed and efficiency benchmarks, printed in one run.

    python -m benchmarks.run [--guard keyword] [--dataset PATH] [--suite standard] [--json OUT]

(a) guard calls of `cheapest` / the exact lower bound (goal <= 1.10), split into what asking
    one candidate at a time already costs (candidates tied with the flip's cost, which the
    bound leaves out) and what batching adds; cheapest / exhaustive calls, and a check that
    both give the same margins;
(b) wall time / summed guard compute time of the cheapest run (goal <= 1.05);
(c) mean batch fill in steady state (goal >= 90%);
(d) throughput of a latency-bound HTTP guard (50 ms a call, served on 127.0.0.1 and called
    through margin's OpenAI-compatible backend, streamed), concurrent vs one request at a time
    (goal >= 20x), and the CPU margin's own process spends per request;
(e) the driver's throughput on one core (goal >= 40,000 candidates/s): candidates it takes
    through the book and the guard per second of its own time, for `cheapest` and
    `exhaustive`: the guard is called in the engine loop's thread between the driver's steps
    (no actor, no worker thread), and its compute is taken out of the search's wall time;
    candidate building, search steps, receipts and results are in.

(a)-(c) run the Ray engine on a local Ray, cache off. The lower bound is the fewest calls any
exact search must make: per prompt, the original, every candidate cheaper than its flip cost
and the flip; or the original and every candidate when nothing flips.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from margin.engine.book import Book, Outcome, Ticket
from margin.engine.calls import CallResult, call_batch
from margin.engine.cluster import connect, disconnect
from margin.engine.pool import Pool
from margin.engine.settings import BATCH_SIZE
from margin.guards.make import build_guard, parse_guard_spec
from margin.guards.spec import GuardSpec
from margin.runfolder import read_jsonl
from margin.runs.executing.execute import execute
from margin.runs.executing.single import search as run_search
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import PreparedRun, prepare
from margin.runs.recording.outputs import RunOutcome
from margin.serving.driver import POOL
from margin.serving.guard_pool import GuardCaller
from margin.types import Candidate, SearchResult


def lower_bound(candidates: list[Candidate], result: SearchResult) -> int:
    if result.flip_cost == 0:
        return 1
    if result.flip is None:  # never flipped within the suite
        return 1 + len(candidates)
    return 1 + sum(1 for c in candidates if c.cost < result.flip.cost) + 1


def one_at_a_time(candidates: list[Candidate], result: SearchResult, verdicts: dict[tuple[Any, ...], str]) -> int:
    """Calls a search asking one candidate at a time, in cost then suite order, would make: it
    differs from the lower bound only where candidates tie with the flip's cost."""
    if result.flip_cost == 0:
        return 1
    if result.flip is None:
        return 1 + len(candidates)
    first = next(i for i, c in enumerate(candidates)
                 if verdicts.get((c.prompt_id, c.transform, c.strength), result.label) != result.label)
    return 1 + first + 1


def engine_run(spec: GuardSpec, args: argparse.Namespace, search: str, out: Path) -> tuple[PreparedRun, RunOutcome]:
    config = RunConfig.of(guard=spec, dataset=args.dataset, suite=args.suite, search=search, cache=False,
                       batch_size=args.batch_size, engine="ray")
    prepared = prepare(config)
    return prepared, execute(prepared, out)


def search_figures(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    spec = parse_guard_spec(args.guard, replicas=args.replicas, num_cpus=args.num_cpus)
    prepared, cheap = engine_run(spec, args, "cheapest", work / "cheapest")
    _, full = engine_run(spec, args, "exhaustive", work / "exhaustive")
    scored = [r for r in cheap.results if r.status == "scored"]
    by_id = {p.id: p for p in prepared.prompts}
    candidates = {r.prompt_id: prepared.candidates(by_id[r.prompt_id]).all() for r in scored}
    bound = sum(lower_bound(candidates[r.prompt_id], r) for r in scored)
    seen = {(r["prompt_id"], r["transform"], r["strength"]): r["verdict"]
            for r in read_jsonl(work / "cheapest" / "receipts.jsonl") if r["kind"] == "call" and r["verdict"]}
    serial = sum(one_at_a_time(candidates[r.prompt_id], r, seen) for r in scored)
    calls = sum(r.guard_calls for r in scored)
    same = [(r.prompt_id, r.flip_cost) for r in cheap.results] == [(r.prompt_id, r.flip_cost) for r in full.results]
    f = cheap.figures
    return {
        "guard": prepared.info.id, "dataset": prepared.dataset.name, "suite": prepared.suite.name,
        "prompts": len(prepared.prompts), "replicas": spec.replicas, "batch_size": f.capacity,
        "cheapest_calls": calls, "lower_bound": bound, "a_calls_over_lower_bound": calls / bound,
        "one_at_a_time_calls": serial, "ties_share": serial / bound, "batching_share": calls / serial,
        "exhaustive_calls": sum(r.guard_calls for r in full.results),
        "cheapest_over_exhaustive": calls / sum(r.guard_calls for r in full.results),
        "margins_equal": same and cheap.report.balanced_margin == full.report.balanced_margin,
        "balanced_margin": cheap.report.balanced_margin,
        "texts_sent": cheap.guard_calls,
        "wall_s": f.search_s, "compute_s": f.compute_s,
        "b_wall_over_compute": f.search_s / f.compute_s if f.compute_s else float("inf"),
        "batches": f.batches, "steady_batches": f.steady_batches,
        "c_steady_fill": f.steady_fill, "mean_fill": f.mean_fill,
    }


class InlinePool(Pool):
    """The guard called in the engine loop's own thread, between the driver's steps: no actor,
    no worker thread, so the driver's time is the search's wall time less the guard's."""

    def __init__(self, guard: Any, batch_size: int) -> None:
        super().__init__(POOL, "inline")
        self.caller = GuardCaller(guard)
        self.figures.capacity = batch_size
        self.done: list[tuple[list[Ticket], CallResult]] = []

    @property
    def inflight(self) -> int:
        return len(self.done)

    def dispatch(self, book: Book, now: float) -> None:
        while not self.done and (tickets := book.take(self.name, self.figures.capacity)):
            self.done.append((tickets, call_batch(self.caller, [t.request for t in tickets])))
            self.notify(None)

    def complete(self, book: Book, token: Any, now: float) -> None:
        tickets, result = self.done.pop()
        book.deliver(Outcome(t.key, t.attempt, out, result.seconds / len(tickets), err)
                     for t, out, err in zip(tickets, result.outputs, result.errors, strict=True))
        self.on_call(len(tickets), self.figures.capacity, result.seconds)


def driver_figures(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """(e): both searches with the guard called inline (`InlinePool`), its compute taken out."""
    spec = parse_guard_spec(args.guard)
    out: dict[str, Any] = {}
    for search in ("cheapest", "exhaustive"):
        config = RunConfig.of(guard=spec, dataset=args.dataset, suite=args.suite, search=search, cache=False,
                           batch_size=args.batch_size, engine="local")
        prepared = prepare(config)
        searched = run_search(prepared, work / f"driver-{search}", pool=InlinePool(build_guard(spec), args.batch_size))
        f = searched.figures
        own = f.search_s - f.compute_s
        out[search] = {"candidates": searched.guard_calls, "search_s": f.search_s, "guard_s": f.compute_s,
                       "driver_s": own, "candidates_per_s": searched.guard_calls / own}
    return {"e_driver": out}


def http_figures(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    from benchmarks.http_guard import start_server

    server, url = start_server(delay_s=0.05)
    try:
        rates = {}
        for mode, concurrency, limit in (("one_at_a_time", 1, args.http_serial_prompts),
                                         ("concurrent", args.http_concurrency, args.http_prompts)):
            # margin's OpenAI-compatible backend: requests stream, `concurrency` in flight.
            spec = parse_guard_spec("llama-guard-3-8b", backend="openai", base_url=url,
                                    backend_options={"max_concurrency": concurrency})
            config = RunConfig(guard=spec, dataset=args.dataset, suite="quick", search="exhaustive", cache=False,
                               limit=limit)
            cpu = time.process_time()
            outcome = execute(prepare(config), work / f"http-{mode}")
            cpu = time.process_time() - cpu
            rates[mode] = {"texts": outcome.guard_calls, "concurrency": concurrency,
                           "wall_s": outcome.figures.search_s,
                           "texts_per_s": outcome.guard_calls / outcome.figures.search_s,
                           "client_cpu_ms_per_text": 1000 * cpu / outcome.guard_calls}
    finally:
        server.terminate()
        server.join(timeout=10)
    return {"http": rates, "d_concurrent_over_serial": rates["concurrent"]["texts_per_s"]
            / rates["one_at_a_time"]["texts_per_s"]}


def show(figures: dict[str, Any]) -> None:
    f = figures
    if "a_calls_over_lower_bound" in f:
        show_search(f)
    if "e_driver" in f:
        c, e = f["e_driver"]["cheapest"], f["e_driver"]["exhaustive"]
        print(f"(e) driver, candidates/s on one core cheapest {c['candidates_per_s']:,.0f}, exhaustive "
              f"{e['candidates_per_s']:,.0f}   ({c['candidates']:,} in {c['driver_s']:.2f} s, {e['candidates']:,} in "
              f"{e['driver_s']:.2f} s of the driver's own time, the guard's {c['guard_s']:.2f} s / {e['guard_s']:.2f} s "
              f"taken out; goal >= 40,000)")
    if "http" in f:
        one, many = f["http"]["one_at_a_time"], f["http"]["concurrent"]
        print(f"(d) HTTP guard, concurrent / serial {f['d_concurrent_over_serial']:.1f}x   "
              f"({many['texts_per_s']:.0f} vs {one['texts_per_s']:.1f} texts/s at 50 ms a call, "
              f"{many['concurrency']} requests in flight; goal >= 20x); margin's process spends "
              f"{many['client_cpu_ms_per_text']:.2f} ms CPU per request (search, client, receipts)")


def show_search(f: dict[str, Any]) -> None:
    print(f"guard {f['guard']} on {f['dataset']} ({f['prompts']} prompts), {f['suite']} suite, "
          f"{f['replicas']} guard actor(s), batches of {f['batch_size']}; run took {f['benchmark_s']:.0f} s")
    print(f"(a) cheapest calls / lower bound    {f['a_calls_over_lower_bound']:.3f}   "
          f"({f['cheapest_calls']:,} / {f['lower_bound']:,}; goal <= 1.10)")
    print(f"    = ties x batching               {f['ties_share']:.3f} x {f['batching_share']:.3f}   "
          f"(one candidate at a time, in cost then suite order: {f['one_at_a_time_calls']:,} calls)")
    print(f"    cheapest / exhaustive calls     {f['cheapest_over_exhaustive']:.3f}   "
          f"({f['cheapest_calls']:,} / {f['exhaustive_calls']:,}); margins equal: {f['margins_equal']} "
          f"(balanced {f['balanced_margin']:.2f})")
    print(f"(b) wall / guard compute time       {f['b_wall_over_compute']:.2f}    "
          f"({f['wall_s']:.2f} s / {f['compute_s']:.2f} s; goal <= 1.05)")
    fill = f["c_steady_fill"]
    print(f"(c) steady-state batch fill         {100 * fill:.1f}%   " if fill is not None else
          "(c) steady-state batch fill         n/a (never enough prompts to fill a batch)   ",
          end="")
    print(f"({f['steady_batches']} of {f['batches']} batches; all batches {100 * (f['mean_fill'] or 0):.1f}%; "
          f"goal >= 90%)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guard", default="keyword", help="guard spec, as for `margin run --guard`")
    parser.add_argument("--dataset", default="xstest",
                        help="sample | xstest (the pinned file; $MARGIN_XSTEST names a local copy) | PATH")
    parser.add_argument("--suite", default="standard")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--num-cpus", type=float, default=None, help="CPUs per guard actor (torch threads)")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE.default)
    parser.add_argument("--http-prompts", type=int, default=150, help="prompts for the concurrent HTTP run")
    parser.add_argument("--http-serial-prompts", type=int, default=6, help="prompts for the serial HTTP run")
    parser.add_argument("--http-concurrency", type=int, default=64, help="requests in flight in the concurrent run")
    parser.add_argument("--skip-http", action="store_true")
    parser.add_argument("--skip-search", action="store_true", help="only (d)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = connect(None)
    began = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="margin-bench-") as tmp:
            figures = {} if args.skip_search else search_figures(args, Path(tmp))
            if not args.skip_search:
                figures.update(driver_figures(args, Path(tmp)))
            if not args.skip_http:
                figures.update(http_figures(args, Path(tmp)))
    finally:
        disconnect(started)
    figures["benchmark_s"] = time.perf_counter() - began
    show(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
