"""A shared inference server's bad minutes, full size: runs and a study through a proxy
that fails the first attempt at each request (20% HTTP 500/503, 10% hangs, 5% non-JSON
bodies, 3% dropped connections; benchmarks/fault_proxy.py), against the same runs clean.

    python -m benchmarks.faults [--prompts 80] [--hang-s 20] [--delay-ms 20] [--skip-study] [--json OUT]

Guard: `llama-guard-4` over `--backend openai`, served by benchmarks/http_guard.py (an
OpenAI-compatible endpoint answering in Llama Guard's format after `--delay-ms`, with the
verdicts of margin's keyword blocklist, so searches run as long as a lexicon guard's), the first
N XSTest prompts, quick suite, cache off; with default options and with `--call-timeout 5`.
Study: studies/local.yaml with its toy models and judges (studies/local_server.py) behind
the proxy. Goal: nothing lost, results identical to the clean run, wall time at most
3 x the clean run + 45 s.
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

from benchmarks.fault_proxy import FaultProxy
from benchmarks.http_guard import start_server
from margin.guards.make import parse_guard_spec
from margin.runs.config import RunConfig
from margin.runs.execute import execute
from margin.runs.prepare import prepare

REPO = Path(__file__).resolve().parents[1]


def guard_run(url: str, args: argparse.Namespace, out: Path, **limits: Any) -> dict[str, Any]:
    spec = parse_guard_spec("llama-guard-4", backend="openai", base_url=url)
    config = RunConfig(guard=spec, dataset=args.dataset, suite="quick", limit=args.prompts, cache=False,
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
        for name, limits in (("faults", {}), ("faults_timeout_5", {"call_timeout_s": 5.0})):
            with FaultProxy(url.removesuffix("/v1"), hang_s=args.hang_s) as proxy:
                runs[name] = guard_run(f"{proxy.url}/v1", args, work / name, **limits)
                runs[name]["faults"] = dict(proxy.faults)
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
    from margin.studies.plan import prepare as prepare_study
    from margin.studies.runner import run_study

    began = time.perf_counter()
    outcome = run_study(prepare_study(path), out, engine="local", cache=False)
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
        with FaultProxy(url, hang_s=args.hang_s) as proxy:
            runs["faults"] = study_run(study_config(work, f"{proxy.url}/v1", "faults"), work / "study-faults")
            runs["faults"]["faults"] = dict(proxy.faults)
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
        run["goal_s"] = 3 * clean["wall_s"] + 45
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
    parser.add_argument("--hang-s", type=float, default=20.0)
    parser.add_argument("--delay-ms", type=float, default=20.0, help="the guard server's time per answer")
    parser.add_argument("--skip-study", action="store_true")
    parser.add_argument("--skip-run", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
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
