"""Scale-out: guard calls per second with `--drivers 1, 2, ...` against one guard faster than
any driver (`benchmarks/instant_guard.py`, a few microseconds a text).

    python -m benchmarks.drivers [--drivers 1,2] [--dataset PATH] [--batch-size 256] [--json OUT]

Each run is `margin run`'s library path on the Ray engine (XSTest, standard suite, cheapest,
cache off) with one guard actor; every driver reserves `--driver-cpus`. The results of every
run are checked to be byte-identical to the first's. On a machine with more cores than
drivers + guard actor, calls per second grow with the drivers until the guard is the slower
side; on two shared cores they share the same two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from margin.engine.cluster import connect, disconnect
from margin.guards.make import parse_guard_spec
from margin.runs.executing.execute import execute
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare

GUARD = f"python:{Path(__file__).resolve().parent / 'instant_guard.py'}:InstantGuard"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--drivers", default="1,2", help="driver counts to run, comma-separated")
    parser.add_argument("--dataset", default="xstest",
                        help="sample | xstest (the pinned file; $MARGIN_XSTEST names a local copy) | PATH")
    parser.add_argument("--suite", default="standard")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--driver-cpus", type=float, default=0.5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    started = connect(None)
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="margin-drivers-") as tmp:
            for n in (int(x) for x in args.drivers.split(",")):
                spec = parse_guard_spec(GUARD, num_cpus=0.5)
                config = RunConfig.of(guard=spec, dataset=args.dataset, suite=args.suite, search="cheapest",
                                   cache=False, batch_size=args.batch_size, drivers=n, driver_cpus=args.driver_cpus)
                out = Path(tmp) / f"drivers-{n}"
                began = time.perf_counter()
                outcome = execute(prepare(config), out)
                wall = time.perf_counter() - began
                results = (out / "results.jsonl").read_bytes()
                same = not rows or results == (Path(tmp) / f"drivers-{rows[0]['drivers']}" / "results.jsonl").read_bytes()
                rows.append({"drivers": n, "guard_calls": outcome.guard_calls, "search_s": outcome.figures.search_s,
                             "calls_per_s": outcome.guard_calls / outcome.figures.search_s, "run_s": wall,
                             "results_identical": same, "load_average": os.getloadavg()[0]})
                r, base = rows[-1], rows[0]["calls_per_s"]
                print(f"{n} driver(s): {r['guard_calls']:,} guard calls, {r['calls_per_s']:,.0f} calls/s "
                      f"({r['calls_per_s'] / base:.2f}x one driver), search {r['search_s']:.1f} s; results identical: "
                      f"{same}; load average {r['load_average']:.1f}", flush=True)
    finally:
        disconnect(started)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
