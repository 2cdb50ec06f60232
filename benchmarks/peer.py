"""margin's adaptive search against published character-level attacks, prompt by prompt, on one guard.

    python benchmarks/peer.py --peer deepwordbug --peer pruthi --peer textbugger-char --peer badchars \\
        --textattack-python $TA_VENV/bin/python [--sample 60 | --limit N] [--bon] [--json FILE] [--markdown DIR]

Peers (each in a process of its own that imports nothing of margin and asks the guard over
HTTP on 127.0.0.1, where this script serves its p_unsafe):
- deepwordbug, pruthi, textbugger-char: TextAttack 0.3.11's recipes (`peer_textattack.py`),
  in TextAttack's own environment (--textattack-python or $TEXTATTACK_PYTHON; it pins
  transformers 4.x, margin needs 5.x). Setup, once, with $TA_VENV and $TA_CACHE any folders
  outside the repository:

    python3 -m venv $TA_VENV
    $TA_VENV/bin/pip install torch==2.13.0
    $TA_VENV/bin/pip install textattack==0.3.11 transformers==4.57.6 datasets==4.4.2 \\
        flair==0.15.1 'huggingface-hub<1.0'
    TA_CACHE_DIR=$TA_CACHE $TA_VENV/bin/python benchmarks/peer_textattack.py --setup

- badchars: BadCharacters2021 (`peer_badchars.py`, written from the paper; NumPy and SciPy
  only: --badchars-python, default this python).

It runs `--search adaptive` on the guard (the in-process engine) on the prompts it judges
correctly (`--sample N`: the same evenly spaced sample as `single_edit.py` and `bon.py`;
`--limit N`: a stratified sample, as margin run --limit), then each peer on the same prompts.
Every peer flip is re-checked on the guard (a success only if the guard's verdict on its
text is wrong) and costed as margin costs any text (code-point Levenshtein x 100 / the
dataset's mean prompt length). `--bon` also runs `--search bon` (101 calls a prompt) for its
curve. For every strategy, ASR(n) (the share of a class's prompts broken within n guard calls,
read off each prompt's calls; margin's count its whole search, pruning included) and the fit
-log ASR = a n^-b on its first tenth, forecasting the rest (`benchmarks/bon.py`'s fit).

A peer's side does not depend on margin's code: `--reuse FILE` takes the peers' rows from an
earlier run's --json (same guard, dataset, seed and sample; their flips are re-checked again)
and runs only margin's side and the peers not in it. `--one-edit all` runs adaptive certified
(as margin run --one-edit all: every one-edit variant left is asked, so each cost is minimal
among one-edit flips); the default is guided.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import HTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.bon import asr_curve, fit_power_law, forecast  # noqa: E402
from benchmarks.http_guard import JsonHandler  # noqa: E402
from benchmarks.single_edit import sample  # noqa: E402
from margin.guards.base import Guard  # noqa: E402
from margin.guards.make import load_guard  # noqa: E402
from margin.runs.executing.execute import execute  # noqa: E402
from margin.runs.preparing.config import RunConfig  # noqa: E402
from margin.runs.preparing.prepare import prepare  # noqa: E402
from margin.types import SearchResult  # noqa: E402

HERE = Path(__file__).resolve().parent
PEERS = ("deepwordbug", "pruthi", "textbugger-char", "badchars")
EPS = 1e-9


def serve(guard: Guard) -> tuple[HTTPServer, str]:
    """POST /p_unsafe {"texts": [...]} -> {"p_unsafe": [...]}, one request at a time, on a free port."""

    class Handler(JsonHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server spelling)
            texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["texts"]
            verdicts = guard.classify(texts)
            self.reply(json.dumps({"p_unsafe": [v.p_unsafe if v is not None else None for v in verdicts]}).encode())

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def peer_command(peer: str, args: argparse.Namespace) -> list[str]:
    if peer == "badchars":
        return [args.badchars_python, str(HERE / "peer_badchars.py"), "--budget", str(args.badchars_budget)]
    if not args.textattack_python:
        raise SystemExit("name TextAttack's python with --textattack-python or $TEXTATTACK_PYTHON (setup: see --help)")
    return [args.textattack_python, str(HERE / "peer_textattack.py"), "--recipe", peer]


def run_peer(command: list[str], url: str, prompts: list[dict[str, str]], seed: int) -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as folder:
        given, got = Path(folder) / "prompts.jsonl", Path(folder) / "results.jsonl"
        given.write_text("".join(json.dumps(p) + "\n" for p in prompts), encoding="utf-8")
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        subprocess.run([*command, "--url", url, "--prompts", str(given), "--out", str(got), "--seed", str(seed)],
                       check=True, env=env)
        rows = [json.loads(line) for line in got.read_text("utf-8").splitlines() if line.strip()]
    return {row["id"]: row for row in rows}


def saved_peers(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """Each peer's side of an earlier run's --json, in the shape `run_peer` returns."""
    saved = json.loads(path.read_text("utf-8")).get("peers", {})
    return {name: {row["id"]: {"status": row["peer_status"], "text": row["peer_text"], "queries": row["peer_queries"],
                               "guard_calls": row["peer_guard_calls"], "kind": row.get("peer_kind"),
                               "budget": row.get("peer_budget")} for row in entry["rows"]}
            for name, entry in saved.items()}


def compare(results: list[SearchResult], texts: dict[str, str], peer: dict[str, dict[str, Any]], guard: Guard,
            cost: Any) -> list[dict[str, Any]]:
    """One row per prompt the guard judges correctly: the peer's re-checked flip and margin's."""
    rows = []
    right = [r for r in results if r.status == "scored" and r.clean_verdict == r.label]
    claimed = [r for r in right if peer[r.prompt_id]["status"] == "successful"]
    verdicts = guard.classify([peer[r.prompt_id]["text"] for r in claimed]) if claimed else []
    rechecked = {r.prompt_id: v for r, v in zip(claimed, verdicts, strict=True)}
    for r in right:
        theirs = peer[r.prompt_id]
        verdict = rechecked.get(r.prompt_id)
        broken = verdict is not None and verdict.label != r.label
        rows.append({
            "id": r.prompt_id, "label": r.label,
            "peer_status": theirs["status"], "peer_rechecked": broken, "peer_text": theirs["text"],
            "peer_cost": cost(texts[r.prompt_id], theirs["text"]) if broken else None,
            "peer_queries": theirs["queries"], "peer_guard_calls": theirs["guard_calls"],
            "peer_kind": theirs.get("kind"), "peer_budget": theirs.get("budget"),  # BadCharacters' own
            "margin_cost": r.flip_cost if r.flip is not None else None, "margin_calls": r.guard_calls,
            "margin_flip": r.flip.strength if r.flip is not None else None,
        })
    return rows


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ours = [r for r in rows if r["margin_cost"] is not None]
    theirs = [r for r in rows if r["peer_cost"] is not None]
    both = [r for r in theirs if r["margin_cost"] is not None]
    dearer = [r for r in theirs if r["margin_cost"] is None or r["margin_cost"] > r["peer_cost"] + EPS]
    return {
        "prompts": len(rows),
        "margin": {"broken": len(ours), "mean_cost": _mean([r["margin_cost"] for r in ours]),
                   "guard_calls": sum(r["margin_calls"] for r in rows),
                   "calls_per_success": sum(r["margin_calls"] for r in rows) / len(ours) if ours else None},
        "peer": {"broken": len(theirs), "mean_cost": _mean([r["peer_cost"] for r in theirs]),
                 "claimed_not_rechecked": sum(1 for r in rows if r["peer_status"] == "successful"
                                              and not r["peer_rechecked"]),
                 "queries_per_success": sum(r["peer_queries"] for r in rows) / len(theirs) if theirs else None,
                 "guard_calls_per_success": (sum(r["peer_guard_calls"] for r in rows) / len(theirs)
                                             if theirs else None)},
        "both_broken": len(both),
        "mean_cost_where_both": {"margin": _mean([r["margin_cost"] for r in both]),
                                 "peer": _mean([r["peer_cost"] for r in both])},
        "margin_dearer": [r["id"] for r in dearer],
        "margin_cheaper": sum(1 for r in both if r["margin_cost"] < r["peer_cost"] - EPS),
        "tied": sum(1 for r in both if abs(r["margin_cost"] - r["peer_cost"]) <= EPS),
    }


def curve(calls_to_flip: list[int | None], budget: int) -> dict[str, Any] | None:
    """ASR against guard calls for one strategy and class, and the power law fitted on the
    calls up to a tenth of `budget` (widened to the first two distinct values 0 < ASR < 1 when an
    attack breaks nothing that early), forecasting ASR at ten times those calls; past the
    budget, ASR stays at its last value (the attack has ended). None: no prompts."""
    if not calls_to_flip:
        return None
    asr = asr_curve(calls_to_flip, budget)
    window = max(2, budget // 10)
    while window < budget and len({value for value in asr[:window] if 0 < value < 1}) < 2:
        window += 1
    fitted = fit_power_law(asr[:window])
    at = 10 * window
    return {"prompts": len(calls_to_flip), "budget": budget, "fit_window": window,
            "asr_at": {str(n): asr[n - 1] for n in (5, 10, 20, 50, 100, 1000, budget) if n <= budget},
            "fit": None if fitted is None else {"a": fitted[0], "b": fitted[1], "forecast_at": at,
                                                "forecast": forecast(*fitted, at)},
            "measured_at_forecast": asr[min(at, budget) - 1]}


def curves(strategies: dict[str, list[tuple[str, int, bool]]]) -> dict[str, dict[str, Any]]:
    """Per strategy and class, from (label, guard calls, broken) per prompt; a strategy's
    budget is the most calls any of its prompts took."""
    out: dict[str, dict[str, Any]] = {}
    for name, rows in strategies.items():
        budget = max(calls for _, calls, _ in rows)
        out[name] = {label: curve([calls if broken else None for lab, calls, broken in rows if lab == label], budget)
                     for label in ("unsafe", "safe")}
    return out


def markdown(rows: list[dict[str, Any]], name: str) -> str:
    def number(value: float | None) -> str:
        return "—" if value is None else f"{value:.2f}"

    lines = [f"| prompt | class | {name} cost | {name} guard calls | margin cost | margin guard calls |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['id']} | {r['label']} | {number(r['peer_cost'])} | {r['peer_guard_calls']} | "
                     f"{number(r['margin_cost'])} | {r['margin_calls']} |")
    return "\n".join(lines) + "\n"


def combined(peers: dict[str, list[dict[str, Any]]]) -> str:
    """One row per prompt: margin's cost (calls) and each peer's, — where it did not break it."""
    def cell(cost: float | None, calls: int) -> str:
        return f"{'—' if cost is None else f'{cost:.2f}'} ({calls})"

    names = list(peers)
    first = peers[names[0]]
    lines = ["| prompt | class | margin adaptive | " + " | ".join(names) + " |",
             "| --- | --- | --- | " + " | ".join("---" for _ in names) + " |"]
    by_peer = {n: {r["id"]: r for r in rows} for n, rows in peers.items()}
    for r in first:
        cells = [cell(by_peer[n][r["id"]]["peer_cost"], by_peer[n][r["id"]]["peer_guard_calls"]) for n in names]
        lines.append(f"| {r['id']} | {r['label']} | {cell(r['margin_cost'], r['margin_calls'])} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def margin_side(args: argparse.Namespace, search: str, max_calls: int | None) -> tuple[Any, Any, float]:
    config = RunConfig.of(guard=args.guard, dataset=args.dataset, search=search, seed=args.seed, limit=args.limit,
                       max_calls=max_calls, one_edit=args.one_edit if search == "adaptive" else None,
                       batch_size=256, engine="local")
    prepared = prepare(config)
    if args.sample is not None:
        guard = load_guard(args.guard)
        chosen = sample(list(prepared.prompts), guard.classify([p.text for p in prepared.prompts]), args.sample)
        prepared = dataclasses.replace(prepared, prompts=tuple(chosen))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        outcome = execute(prepared, Path(folder) / "run")
    return prepared, outcome, time.perf_counter() - started


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--peer", action="append", choices=PEERS, help="a peer to run (repeat; default deepwordbug)")
    parser.add_argument("--guard", default="minilm", help="a guard that reports p_unsafe")
    parser.add_argument("--dataset", default="xstest", help="the pinned file; $MARGIN_XSTEST names a local copy")
    parser.add_argument("--textattack-python", default=os.environ.get("TEXTATTACK_PYTHON"),
                        help="the python of TextAttack's environment (default: $TEXTATTACK_PYTHON)")
    parser.add_argument("--badchars-python", default=sys.executable, help="a python with NumPy and SciPy")
    parser.add_argument("--badchars-budget", type=int, default=5, help="BadCharacters' most perturbations")
    parser.add_argument("--max-calls", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--one-edit", default=None, choices=("guided", "all", "none"),
                        help="adaptive's --one-edit (all: ask every one-edit variant left, so each cost is certified)")
    parser.add_argument("--limit", type=int, default=None, help="a stratified sample of N prompts, as margin run --limit")
    parser.add_argument("--sample", type=int, default=None, help="N evenly spaced prompts the guard gets right")
    parser.add_argument("--bon", action="store_true", help="also run --search bon (101 calls) for its curve")
    parser.add_argument("--json", type=Path, default=None, help="write the summary and per-prompt rows here too")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="take the peers in this earlier --json (same guard, dataset, seed, sample) from it")
    parser.add_argument("--markdown", type=Path, default=None, help="a folder for each peer's per-prompt table")
    args = parser.parse_args()
    args.peer = list(dict.fromkeys(args.peer or ["deepwordbug"]))
    return args


def main() -> None:
    args = parse_args()
    saved = saved_peers(args.reuse) if args.reuse else {}  # fail before the run
    prepared, outcome, margin_s = margin_side(args, "adaptive", args.max_calls)
    guard = load_guard(args.guard)
    texts = {p.id: p.text for p in prepared.prompts}
    right = [r for r in outcome.results if r.status == "scored" and r.clean_verdict == r.label]
    report: dict[str, Any] = {
        "guard": guard.info.id, "dataset": prepared.dataset.name, "prompts": len(prepared.prompts), "seed": args.seed,
        "sample": args.sample, "limit": args.limit, "max_calls": prepared.search_options(prepared.prompts[0])["max_calls"],
        "one_edit": args.one_edit or "guided",
        "margin_wall_s": margin_s, "peers": {}}
    strategies = {"margin adaptive": [(r.label, r.guard_calls, r.flip is not None) for r in right]}
    for name in args.peer:
        started = time.perf_counter()
        if name in saved:
            peer, wall = saved[name], None
            missing = [r.prompt_id for r in right if r.prompt_id not in peer]
            if missing:
                raise SystemExit(f"{args.reuse} has no {name} row for prompts {missing[:5]}")
        else:
            server, url = serve(guard)
            try:
                peer = run_peer(peer_command(name, args), url,
                                [{"id": r.prompt_id, "text": texts[r.prompt_id], "label": r.label} for r in right],
                                args.seed)
            finally:
                server.shutdown()
            wall = time.perf_counter() - started
        rows = compare(outcome.results, texts, peer, guard, prepared.cost_model.cost)
        report["peers"][name] = {"wall_s": wall, "unsafe": summary([r for r in rows if r["label"] == "unsafe"]),
                                 "safe": summary([r for r in rows if r["label"] == "safe"]), "rows": rows}
        strategies[name] = [(r["label"], r["peer_guard_calls"], r["peer_cost"] is not None) for r in rows]
        if args.markdown:
            args.markdown.mkdir(parents=True, exist_ok=True)
            (args.markdown / f"{name}.md").write_text(markdown(rows, name))
    if args.markdown and report["peers"]:
        (args.markdown / "all.md").write_text(combined({n: e["rows"] for n, e in report["peers"].items()}))
    if args.bon:
        _, bon, _ = margin_side(args, "bon", 101)
        report["bon_rows"] = [{"id": r.prompt_id, "label": r.label, "cost": r.flip_cost if r.flip else None,
                               "calls": r.guard_calls} for r in bon.results
                              if r.status == "scored" and r.clean_verdict == r.label]
        strategies["margin bon"] = [(r["label"], r["calls"], r["cost"] is not None) for r in report["bon_rows"]]
    report["curves"] = curves(strategies)
    report["load_average"] = os.getloadavg()
    shown = {**{k: v for k, v in report.items() if k != "bon_rows"}, "peers": {n: {k: v for k, v in e.items() if k != "rows"} for n, e in report["peers"].items()}}
    print(json.dumps(shown, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
