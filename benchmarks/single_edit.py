"""The exhaustive single-edit minimum of a fixed sample of XSTest prompts, and adaptive against it.

    python benchmarks/single_edit.py --guard minilm --sample 120 --verdicts runs/one-edit.jsonl
    python benchmarks/single_edit.py --guard minilm --sample 120 --verdicts runs/one-edit.jsonl \\
        --adaptive --json runs/one-edit.json
    python benchmarks/single_edit.py --guard minilm --sample 120 --verdicts runs/one-edit.jsonl --simulate

The sample: of the prompts the guard gets right, in dataset order, `--sample` evenly spaced ones
(i * n // sample). For each, every one-edit variant (`margin.search.single_edits`) is judged
and its verdict written to `--verdicts` (JSON lines, one prompt a line; a prompt already there
is not asked again, so an interrupted run resumes). `--adaptive` then runs `--search adaptive`
on the same prompts (the in-process engine) and compares each prompt's cost with the minimum.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import margin.search.adaptive as adaptive_module  # noqa: E402
import margin.search.sweep as sweep_module  # noqa: E402
from margin.guards.make import load_guard  # noqa: E402
from margin.runs.executing.execute import execute  # noqa: E402
from margin.runs.preparing.config import RunConfig  # noqa: E402
from margin.runs.preparing.prepare import prepare  # noqa: E402
from margin.search.edits import parse_op  # noqa: E402
from margin.search.single_edits import OneEdit, single_edit_minimum  # noqa: E402
from margin.search.sweep import OneEditSweep  # noqa: E402

EPS = 1e-9


def sample(prompts: list[Any], verdicts: list[Any], size: int) -> list[Any]:
    right = [p for p, v in zip(prompts, verdicts, strict=True) if v is not None and not v.is_wrong_for(p.label)]
    size = min(size, len(right))
    return [right[i * len(right) // size] for i in range(size)]


def exhaustive(guard: Any, prompts: list[Any], cost_model: Any, path: Path) -> dict[str, dict[str, Any]]:
    done: dict[str, dict[str, Any]] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            done[row["id"]] = row
    with path.open("a") as out:
        for prompt in prompts:
            if prompt.id in done:
                continue
            found = single_edit_minimum(guard.classify, prompt.text, prompt.label, cost_model)
            row = {"id": prompt.id, "label": prompt.label, "text": prompt.text, "minimum": found.cost,
                   "flips": [[e.kind, str(e.op)] for e in found.flips], "asked": found.asked,
                   "p_unsafe": [[e.kind, str(e.op), v.p_unsafe if v else None] for e, v in found.verdicts]}
            out.write(json.dumps(row) + "\n")
            out.flush()
            done[prompt.id] = row
    return done


def adaptive(guard_spec: str, ids: set[str], max_calls: int | None, one_edit: str | None = None) -> dict[str, Any]:
    config = RunConfig.of(guard=guard_spec, dataset="xstest", search="adaptive", max_calls=max_calls,
                       one_edit=one_edit, batch_size=256, engine="local")
    prepared = prepare(config)
    prepared = dataclasses.replace(prepared, prompts=tuple(p for p in prepared.prompts if p.id in ids))
    with tempfile.TemporaryDirectory() as folder:
        outcome = execute(prepared, Path(folder) / "run")
    return {r.prompt_id: r for r in outcome.results}


def table(rows: dict[str, dict[str, Any]], results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per prompt: the exhaustive single-edit minimum against adaptive's cost, calls and tag."""
    return [{"id": i, "label": r["label"], "minimum": r["minimum"], "adaptive": results[i].flip_cost,
             "calls": results[i].guard_calls, "one_edit": dict(results[i].extra).get("one_edit")}
            for i, r in rows.items() if i in results]


def compare(rows: dict[str, dict[str, Any]], results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label in ("unsafe", "safe"):
        mine = [rows[i] for i in rows if rows[i]["label"] == label and i in results]
        has = [r for r in mine if r["minimum"] is not None]
        above = [r["id"] for r in has if results[r["id"]].flip_cost is None
                 or results[r["id"]].flip_cost > r["minimum"] + EPS]
        broken = [r for r in mine if results[r["id"]].flip is not None]
        calls = sum(results[r["id"]].guard_calls for r in mine)
        minimal = [r["id"] for r in mine if dict(results[r["id"]].extra).get("one_edit") == "minimal"]
        out[label] = {"prompts": len(mine), "with_one_edit_flip": len(has), "adaptive_above_minimum": above,
                      "tagged_minimal": len(minimal),
                      "broken": len(broken), "guard_calls": calls,
                      "calls_per_success": calls / len(broken) if broken else None,
                      "mean_cost": sum(results[r["id"]].flip_cost for r in broken) / len(broken) if broken else None}
    return out


def simulate(sweep: OneEditSweep, moves: dict[OneEdit, float], flips: Sequence[OneEdit], round_size: int,
             budget: int) -> int | None:
    """How many variants the sweep asks before its round holding a flip ends (None: not
    within `budget`), given every variant's move: for tuning from recorded verdicts."""
    wanted, asked = set(flips), 0
    rounds = [sweep.probes()]
    while asked < budget and not sweep.complete:
        batch = rounds.pop() if rounds else sweep.next(round_size)
        batch = batch[: budget - asked]
        for edit in batch:
            sweep.record(edit, moves.get(edit, float("-inf")))
        asked += len(batch)
        if wanted & set(batch):
            return asked
    return None


def simulated(row: dict[str, Any]) -> int | None:
    """`simulate` on a --verdicts row: every word probed, rounds of 4, no call limit."""
    def closeness(p: float) -> float:
        return p if row["label"] == "safe" else 1.0 - p

    moves = {OneEdit(kind, parse_op(op)): closeness(p) for kind, op, p in row["p_unsafe"] if p is not None}
    flips = [OneEdit(kind, parse_op(op)) for kind, op in row["flips"]]
    return simulate(OneEditSweep(row["text"]), moves, flips, 4, len(row["p_unsafe"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guard", default="minilm")
    parser.add_argument("--sample", type=int, default=120)
    parser.add_argument("--verdicts", type=Path, required=True)
    parser.add_argument("--adaptive", action="store_true")
    parser.add_argument("--max-calls", type=int, default=None)
    parser.add_argument("--one-edit", default=None, choices=("guided", "all", "none"),
                        help="adaptive's --one-edit (all: ask every one-edit variant left, so each cost is certified)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--adaptive-only", action="store_true",
                        help="run adaptive on the whole sample and report its figures; no one-edit variant asked")
    parser.add_argument("--cached-only", action="store_true",
                        help="only the sample's prompts already in --verdicts (ask no one-edit variant)")
    parser.add_argument("--sweep-calls", type=int, default=None, help="adaptive's early sweep limit (both labels)")
    parser.add_argument("--no-tail", action="store_true", help="adaptive without the sweep of the calls left")
    parser.add_argument("--no-sweep", action="store_true", help="adaptive without any sweep (as before issue 23)")
    parser.add_argument("--simulate", action="store_true",
                        help="per prompt with a one-edit flip: variants the sweep would ask to reach one (from --verdicts)")
    parser.add_argument("--never-give-up", action="store_true", help="the calls-left sweep never stops early")
    parser.add_argument("--seeded", action="store_true", help="the knock-out round seeds the sweep")
    parser.add_argument("--probe-kind", default=None, choices=("deletion", "substitution", "swap", "insertion"),
                        help="the kind of the sweep's probe in each word (adaptive and --simulate)")
    args = parser.parse_args()
    if args.probe_kind:
        sweep_module.PROBE_KIND = args.probe_kind
    adaptive_module.SWEEP_SEEDED = args.seeded
    if args.never_give_up:
        adaptive_module.SWEEP_GIVE_UP = None
    if args.sweep_calls is not None or args.no_sweep:
        adaptive_module.SWEEP_CALLS = dict.fromkeys(("unsafe", "safe"), 0 if args.no_sweep else args.sweep_calls)
    adaptive_module.SWEEP_TAIL = not (args.no_tail or args.no_sweep)
    prepared = prepare(RunConfig(guard=args.guard, dataset="xstest", search="adaptive"))
    guard = load_guard(args.guard)
    prompts = list(prepared.prompts)
    chosen = sample(prompts, guard.classify([p.text for p in prompts]), args.sample)
    if args.adaptive_only:
        results = adaptive(args.guard, {p.id for p in chosen}, args.max_calls, args.one_edit)
        rows = {p.id: {"id": p.id, "label": p.label, "minimum": None} for p in chosen}
        report = {"guard": args.guard, "sample": len(chosen), "adaptive": compare(rows, results)}
        print(json.dumps(report, indent=2))
        if args.json:
            args.json.write_text(json.dumps(report, indent=2) + "\n")
        return
    if args.cached_only:
        cached = {json.loads(line)["id"] for line in args.verdicts.read_text().splitlines()}
        chosen = [p for p in chosen if p.id in cached]
    rows = exhaustive(guard, chosen, prepared.cost_model, args.verdicts)
    rows = {p.id: rows[p.id] for p in chosen}
    report: dict[str, Any] = {"guard": args.guard, "sample": len(chosen),
                              "with_one_edit_flip": sum(1 for r in rows.values() if r["minimum"] is not None)}
    if args.simulate:
        report["simulated_variants_to_a_flip"] = {i: simulated(r) for i, r in rows.items() if r["minimum"] is not None}
    if args.adaptive:
        results = adaptive(args.guard, set(rows), args.max_calls, args.one_edit)
        report["adaptive"] = compare(rows, results)
        report["per_prompt"] = table(rows, results)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
