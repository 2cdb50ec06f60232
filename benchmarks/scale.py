"""Flat memory as the dataset grows: peak driver RSS and calls/s at 450, 10,000 and 100,000 prompts.

    python -m benchmarks.scale [--sizes 450,10000,100000] [--guard keyword] [--engine local] [--json OUT]

The set is synthetic: XSTest (`--source xstest`, the pinned file; $MARGIN_XSTEST names a local copy) or the bundled 48-prompt sample
repeated with distinct ids and a small distinct variation, so that no two texts are the same
and no answer comes from memory: copy k of a prompt ends in its copy number ("How do I kill
a Python process? (#17)"), the 450-prompt set included. Each size runs
`margin run`'s library path (`prepare` + `execute`: standard suite, cheapest, cache off,
receipts and results written) in a process of its own, which reports its peak RSS
(`getrusage`), the search's guard calls per second (of wall time, and of the process's CPU time,
which compares sizes fairly when the machine's load moves) and the candidates per second the driver
took through the book and the guard (the search's wall time: candidate building, receipts
and the guard's own time on the same core with `--engine local` included).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from margin.datasets import load_dataset
from margin.engine.settings import BATCH_SIZE


def variation(text: str, copy: int) -> str:
    """Copy `copy` of a prompt: a copy number after it, so every text of the set is distinct
    and every prompt, in every size of set, is as long as every other copy of it."""
    return f"{text} (#{copy})"


def write_set(source: str, size: int, path: Path) -> None:
    """`size` prompts: the source's, then copies of them with variations, in rounds."""
    prompts = load_dataset(source).prompts
    with open(path, "w", encoding="utf-8", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["id", "prompt", "type", "label"])
        for i in range(size):
            p, copy = prompts[i % len(prompts)], i // len(prompts)
            out.writerow([f"{p.id}-{copy}", variation(p.text, copy), p.type, p.label])


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def one(args: argparse.Namespace) -> dict[str, Any]:
    """One size, in this process: the figures as a dict."""
    from margin.engine.cluster import connect, disconnect
    from margin.guards.make import parse_guard_spec
    from margin.runs.executing.execute import execute
    from margin.runs.preparing.config import RunConfig
    from margin.runs.preparing.prepare import prepare

    started = connect(None) if args.engine == "ray" else False
    try:
        config = RunConfig.of(guard=parse_guard_spec(args.guard), dataset=str(args.dataset), suite=args.suite,
                           search=args.search, cache=False, engine=args.engine, batch_size=args.batch_size)
        prepared = prepare(config)
        total = len(prepared.prompts)
        seen = {"done": 0, "search_rss_mb": 0.0, "search_cpu_s": 0.0}

        def on_result(_: Any) -> None:
            seen["done"] += 1
            if seen["done"] == total:  # the search's peak, before results and snapshot are written
                seen["search_rss_mb"] = peak_rss_mb()
                seen["search_cpu_s"] = time.process_time() - cpu_began

        load_before = os.getloadavg()[0]
        cpu_began = time.process_time()
        began = time.perf_counter()
        outcome = execute(prepared, args.out, on_result=on_result)
        wall = time.perf_counter() - began
    finally:
        disconnect(started)
    f = outcome.figures
    return {"prompts": total, "guard_calls": outcome.guard_calls, "search_s": f.search_s,
            "calls_per_s": outcome.guard_calls / f.search_s, "guard_compute_s": f.compute_s,
            # CPU time of this process (driver and, with --engine local, the guard): calls per CPU
            # second compare sizes fairly on a machine whose load moves between runs
            "search_cpu_s": seen["search_cpu_s"], "calls_per_cpu_s": outcome.guard_calls / seen["search_cpu_s"],
            "load_average": [load_before, os.getloadavg()[0]],
            "search_peak_rss_mb": seen["search_rss_mb"], "peak_rss_mb": peak_rss_mb(), "run_s": wall}


def run_size(args: argparse.Namespace, size: int, work: Path) -> dict[str, Any]:
    dataset = work / f"set-{size}.csv"
    write_set(args.source, size, dataset)
    command = [sys.executable, "-m", "benchmarks.scale", "--one", "--dataset", str(dataset),
               "--out", str(work / f"run-{size}"), "--guard", args.guard, "--engine", args.engine,
               "--suite", args.suite, "--search", args.search, "--batch-size", str(args.batch_size)]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"size {size} failed:\n{proc.stderr[-3000:]}")
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    for path in (work / f"run-{size}").glob("*"):
        path.unlink()  # receipts of a big set run to gigabytes
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="450,10000,100000", help="prompts per run, comma-separated")
    parser.add_argument("--source", default="xstest",
                        help="the prompts the set repeats: xstest (default; $MARGIN_XSTEST names a local copy), sample or a PATH")
    parser.add_argument("--guard", default="keyword")
    parser.add_argument("--engine", default="local", choices=("local", "ray"))
    parser.add_argument("--suite", default="standard")
    parser.add_argument("--search", default="cheapest")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE.default)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if args.one:
        print(json.dumps(one(args)))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="margin-scale-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            rows.append(run_size(args, size, Path(tmp)))
            show(rows)
    if args.json:
        args.json.write_text(json.dumps({"source": args.source, "guard": args.guard, "engine": args.engine,
                                         "runs": rows}, indent=2) + "\n")


def show(rows: list[dict[str, Any]]) -> None:
    r = rows[-1]
    base, base_cpu = rows[0]["calls_per_s"], rows[0]["calls_per_cpu_s"]
    print(f"{r['prompts']:>8,} prompts: {r['guard_calls']:>11,} guard calls, {r['calls_per_s']:>8,.0f} calls/s "
          f"({r['calls_per_s'] / base:.2f} of the first), {r['calls_per_cpu_s']:,.0f} calls per CPU second "
          f"({r['calls_per_cpu_s'] / base_cpu:.2f}), load {r['load_average'][0]:.1f}-{r['load_average'][1]:.1f}, peak RSS {r['search_peak_rss_mb']:,.0f} MB in the search, "
          f"{r['peak_rss_mb']:,.0f} MB with results and snapshot; run {r['run_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
