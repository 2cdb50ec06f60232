"""A shared inference server's bad minutes, full size: runs and a study through a proxy
(benchmarks/fault_proxy.py), against the same runs clean. Scenarios:

- `mix`: the first attempt at each request fails (20% HTTP 500/503, 10% hangs of
  `--hang-s`, 5% non-JSON bodies, 3% dropped connections); the run also with `--call-timeout 5`;
- `outage`: halfway through (by the clean run's requests) the endpoint goes down for
  `--outage-s` (in-flight requests dropped, connections refused), then comes back;
- `storm`: a quarter of the way through, 40% of all requests are answered 429 with
  Retry-After: 2 for `--storm-s`;
- `hangs`: 20% (`--hang-share`) of first attempts hang for `--long-hang-s`.

    python -m benchmarks.faults [--prompts 80] [--scenarios mix,outage,storm,hangs] [--skip-study] [--json OUT]

Guard: `llama-guard-4` over `--backend openai`, served by benchmarks/http_guard.py (an
OpenAI-compatible endpoint answering in Llama Guard's format after `--delay-ms`, with the
verdicts of margin's keyword blocklist, so searches run as long as a lexicon guard's), the first
N XSTest prompts, quick suite, cache off; with default options and with `--call-timeout 5`.
Study: studies/local.yaml with its toy models and judges (studies/local_server.py) behind
the proxy. Goal: nothing lost, results identical to the clean run, wall time at most
3 x the clean run + the fault's duration + 45 s.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.fault_proxy import FaultMix, FaultProxy, Outage, Storm
from benchmarks.http_guard import start_server
from margin.guards.make import parse_guard_spec
from margin.runs.executing.execute import execute
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare

REPO = Path(__file__).resolve().parents[1]
NO_MIX = FaultMix(http_5xx=0, hang=0, garbage=0, drop=0)
SCENARIOS = ("mix", "outage", "storm", "hangs")


def scenario(name: str, upstream: str, clean_requests: int, args: argparse.Namespace) -> tuple[FaultProxy, float]:
    """The proxy for a scenario, and how long its fault lasts (for the goal)."""
    if name == "mix":
        return FaultProxy(upstream, hang_s=args.hang_s), 0.0
    if name == "outage":
        return FaultProxy(upstream, mix=NO_MIX, outage=Outage(after=clean_requests // 2, seconds=args.outage_s)), \
            args.outage_s
    if name == "storm":
        storm = Storm(share=0.4, retry_after_s=2.0, seconds=args.storm_s, after=clean_requests // 4)
        return FaultProxy(upstream, mix=NO_MIX, storm=storm), args.storm_s
    assert name == "hangs"
    mix = FaultMix(http_5xx=0, hang=args.hang_share, garbage=0, drop=0)
    return FaultProxy(upstream, mix=mix, hang_s=args.long_hang_s), args.long_hang_s


def proxied(proxy: FaultProxy, fault_s: float, run: dict[str, Any]) -> dict[str, Any]:
    run["faults"] = dict(proxy.faults) | ({"outages": proxy.downs} if proxy.downs else {})
    run["fault_s"] = fault_s
    return run


def guard_run(url: str, args: argparse.Namespace, out: Path, **limits: Any) -> dict[str, Any]:
    spec = parse_guard_spec("llama-guard-4", backend="openai", base_url=url)
    config = RunConfig.of(guard=spec, dataset=args.dataset, suite="quick", limit=args.prompts, cache=False,
                       engine="local", **limits)
    began = time.perf_counter()
    outcome = execute(prepare(config), out)
    f = outcome.figures
    return {"wall_s": time.perf_counter() - began, "requests": outcome.guard_calls, "missing": outcome.missing,
            "retries": f.retries, "hedges": f.hedges, "timeouts": f.timeouts, "overloads": f.overloads,
            "lowest_concurrency": f.lowest_concurrency, "results": (out / "results.jsonl").read_bytes()}


def guard_figures(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    server, url = start_server(delay_s=args.delay_ms / 1000, label="keyword")
    try:
        runs = {"clean": guard_run(url, args, work / "clean")}
        plans = [(name, name, {}) for name in args.scenarios]
        if "mix" in args.scenarios:
            plans.insert(args.scenarios.index("mix") + 1, ("mix", "mix_timeout_5", {"call_timeout_s": 5.0}))
        for kind, name, limits in plans:
            proxy, fault_s = scenario(kind, url.removesuffix("/v1"), runs["clean"]["requests"], args)
            with proxy:
                runs[name] = proxied(proxy, fault_s, guard_run(f"{proxy.url}/v1", args, work / name, **limits))
    finally:
        server.terminate()
        server.join(timeout=10)
    return summarise(runs)


def study_config(work: Path, url: str, name: str) -> Path:
    config = yaml.safe_load((REPO / "studies" / "local.yaml").read_text())
    for model in [*config["models"], config["judge"]["model"], config["second_judge"]["model"]]:
        model["base_url"] = url
    config["name"] = name
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def study_run(path: Path, out: Path) -> dict[str, Any]:
    from margin.studies.plan import plan_study
    from margin.studies.runner import run_study

    began = time.perf_counter()
    outcome = run_study(plan_study(path), out, engine="local", cache=False)
    return {"wall_s": time.perf_counter() - began, "requests": outcome.calls.sent, "missing": outcome.calls.missing,
            "retries": outcome.calls.retries, "hedges": outcome.calls.hedges,
            "results": json.dumps(outcome.pairings["data"], sort_keys=True).encode()}


def study_figures(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import importlib.util
    import threading

    spec = importlib.util.spec_from_file_location("margin_local_server", REPO / "studies" / "local_server.py")
    assert spec is not None and spec.loader is not None
    toy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(toy)
    server = toy.make_server("127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        runs = {"clean": study_run(study_config(work, f"{url}/v1", "clean"), work / "study-clean")}
        for name in args.scenarios:
            proxy, fault_s = scenario(name, url, runs["clean"]["requests"], args)
            with proxy:
                run = study_run(study_config(work, f"{proxy.url}/v1", name), work / f"study-{name}")
                runs[name] = proxied(proxy, fault_s, run)
    finally:
        server.shutdown()
        server.server_close()
    return summarise(runs)


def summarise(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    clean = runs["clean"]
    reference = clean["results"]
    for run in runs.values():
        run["identical"] = run.pop("results") == reference
        run["over_clean"] = run["wall_s"] / clean["wall_s"]
        run["goal_s"] = 3 * clean["wall_s"] + run.get("fault_s", 0.0) + 45
    return runs


def show(name: str, runs: dict[str, Any]) -> None:
    for mode, run in runs.items():
        extra = f"  faults {run['faults']}" if "faults" in run else ""
        print(f"{name:6} {mode:17} {run['wall_s']:7.1f} s  ({run['over_clean']:.1f}x clean; goal <= "
              f"{run['goal_s']:.0f} s)  requests {run['requests']}  retries {run['retries']}  hedges "
              f"{run['hedges']}  missing {run['missing']}  identical {run['identical']}{extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="xstest",
                        help="sample | xstest (the pinned file; $MARGIN_XSTEST names a local copy) | PATH")
    parser.add_argument("--prompts", type=int, default=80)
    parser.add_argument("--hang-s", type=float, default=20.0, help="mix: how long a hang lasts")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="which, comma-separated: mix, outage, storm, hangs")
    parser.add_argument("--outage-s", type=float, default=45.0)
    parser.add_argument("--storm-s", type=float, default=30.0)
    parser.add_argument("--long-hang-s", type=float, default=120.0, help="hangs: how long a hang lasts")
    parser.add_argument("--hang-share", type=float, default=0.2, help="hangs: the share of first attempts that hang")
    parser.add_argument("--delay-ms", type=float, default=20.0, help="the guard server's time per answer")
    parser.add_argument("--skip-study", action="store_true")
    parser.add_argument("--skip-run", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    args.scenarios = [name for name in args.scenarios.split(",") if name]
    if unknown := sorted(set(args.scenarios) - set(SCENARIOS)):
        parser.error(f"unknown scenarios {unknown}; choose from {', '.join(SCENARIOS)}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    figures: dict[str, Any] = {"load_average": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="margin-faults-") as tmp:
        if not args.skip_run:
            figures["run"] = guard_figures(args, Path(tmp))
            show("run", figures["run"])
        if not args.skip_study:
            figures["study"] = study_figures(args, Path(tmp))
            show("study", figures["study"])
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
