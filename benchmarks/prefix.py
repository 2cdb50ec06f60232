"""Shared-prefix reuse in the transformers backend: how much faster, and is it the same?

    python -m benchmarks.prefix [--dataset xstest|sample|PATH] [--size small] [--batch-size 32]
                                [--batches 3] [--repeats 3] [--dtype float32] [--threads 1] [--json OUT]
                                [--responses PATH [--per-case 8] [--only-responses]]

A Llama-Guard-3-8B-shaped model built offline (`benchmarks.llama_guard_3`: Llama Guard 3-8B's
chat template, a tokenizer trained here, random weights, answering `safe` the way the real
model does) classifies the same batches four ways: the full computation in one padded batch
(the backend before prefix reuse), the full computation in length chunks, the prefix reused
in one padded batch, and the prefix reused in length chunks (the default). Two kinds of
batches: the dataset's prompts, and candidates of the standard suite drawn at random (a
search's batches mix bare prompts with wrapped ones, so lengths vary much more). With
`--responses` (a labelled-completions file, as `margin run --target response` loads it), two
more: response candidates, `--per-case` of each of a few cases per batch (a search's calls hold
runs of candidates of one case: `benchmarks.responses` measures how many), and one candidate of
each of `--batch-size` cases (the least any case prefix can share). A response's candidates share
their case's own prefix (the template and the prompt turn), registered as a guard call does
(`GenerativeGuard.use_case_prefixes`).

Speed: the least CPU time of this process over `repeats` interleaved runs per way, with one
torch thread (the default), so that other jobs sharing the machine's cores change the
figure less than they change wall time; the wall time is reported beside it. Sameness, against the first way:
verdicts and raw outputs identical or not, and the largest difference of p_unsafe and of any
logprob among each step's top candidates. For scale, the same differences between the full
computation of each batch and of each text alone (the noise batching alone brings).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from margin.backends.generation import Generation
from margin.guards.base import apply_threshold
from margin.guards.generative import GenerativeGuard
from margin.types import Exchange

NO_CHUNKS = {"min_tokens": 10**12, "max_tokens": 10**12}
WAYS = {  # name: (prefix reuse, length chunks)
    "full, one padded batch": (False, False),
    "full, length chunks": (False, True),
    "prefix, one padded batch": (True, False),
    "prefix, length chunks": (True, True),
}


def load_guard(path: Path, prefix: bool, dtype: str) -> GenerativeGuard:
    from margin.guards.make import build_guard, parse_guard_spec

    spec = parse_guard_spec("llama-guard-3-8b", model=str(path),
                            backend_options={"prefix_cache": prefix, "dtype": dtype, "device": "cpu"})
    guard = build_guard(spec)
    assert isinstance(guard, GenerativeGuard)
    return guard


def run(guard: GenerativeGuard, batches: Sequence[Sequence[str | Exchange]]) -> tuple[float, float, list[Generation]]:
    """CPU seconds, wall seconds and the outputs of the guard's backend on `batches`."""
    outputs: list[Generation] = []
    cpu, wall = time.process_time(), time.perf_counter()
    for batch in batches:
        guard.use_case_prefixes(batch)  # type: ignore[arg-type]  # as `classify` does
        for out in guard.backend.generate([guard.adapter.request(t) for t in batch]):  # type: ignore[arg-type]
            assert isinstance(out, Generation), out
            outputs.append(out)
    return time.process_time() - cpu, time.perf_counter() - wall, outputs


def compare(guard: GenerativeGuard, ref: Sequence[Generation], got: Sequence[Generation]) -> dict[str, Any]:
    """How far `got` is from `ref`: verdicts, raw texts, p_unsafe and every top logprob."""
    def verdict(g: Generation) -> Any:
        return apply_threshold(guard.adapter.parse([g]), guard.info.threshold)

    va, vb = [verdict(g) for g in ref], [verdict(g) for g in got]
    dp = max((abs(a.p_unsafe - b.p_unsafe) for a, b in zip(va, vb, strict=True)
              if a.p_unsafe is not None and b.p_unsafe is not None), default=0.0)
    dl = 0.0
    for a, b in zip(ref, got, strict=True):
        for sa, sb in zip(a.steps, b.steps, strict=False):
            top = dict(sb.top)
            dl = max([dl, *(abs(lp - top[tok]) for tok, lp in sa.top if tok in top)])
    return {"verdicts_identical": [v.label for v in va] == [v.label for v in vb],
            "raw_identical": [g.raw for g in ref] == [g.raw for g in got],
            "p_unsafe_max_diff": dp, "logprob_max_diff": dl,
            "labels": {label: sum(v.label == label for v in vb) for label in sorted({v.label for v in vb})}}


def scenario(name: str, batches: list[list[str | Exchange]], guards: dict[bool, GenerativeGuard], repeats: int) -> dict[str, Any]:
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    walls: dict[str, list[float]] = {way: [] for way in WAYS}
    outputs: dict[str, list[Generation]] = {}
    stats: dict[str, dict[str, int]] = {}
    for _ in range(repeats):  # interleaved, so a burst of load hits every way alike
        for way, (prefix, chunks) in WAYS.items():
            guard = guards[prefix]
            backend: Any = guard.backend
            default = backend.chunking
            backend.chunking = default if chunks else NO_CHUNKS
            before = dict(backend.stats)
            try:
                seconds, wall, outputs[way] = run(guard, batches)
            finally:
                backend.chunking = default
            times[way].append(seconds)
            walls[way].append(wall)
            stats[way] = {k: backend.stats[k] - before[k] for k in before}
    reference = outputs["full, one padded batch"]
    alone = run(guards[False], [[t] for batch in batches for t in batch])[2]
    base = min(times["full, one padded batch"])
    ways = {}
    for way in WAYS:
        s = stats[way]
        ways[way] = {"best_cpu_s": min(times[way]), "best_wall_s": min(walls[way]), "speedup": base / min(times[way]),
                     "padding_share": 1 - s["run_tokens"] / s["padded_tokens"], "batches": s["batches"],
                     "tokens_run_per_text": s["run_tokens"] / (s["prefix_rows"] + s["full_rows"]),
                     **compare(guards[False], reference, outputs[way])}
    return {"scenario": name, "texts": sum(len(b) for b in batches), "batch_size": len(batches[0]),
            "ways": ways, "batching_noise": compare(guards[False], reference, alone)}


def make_batches(args: argparse.Namespace) -> dict[str, list[list[str | Exchange]]]:
    from margin.runs.preparing.config import RunConfig
    from margin.runs.preparing.prepare import prepare_inputs

    n = args.batch_size * args.batches
    cut = args.batch_size
    batches: dict[str, list[list[str | Exchange]]] = {}
    if not args.only_responses:
        prepared = prepare_inputs(RunConfig(guard="keyword", dataset=args.dataset, suite="standard"))
        prompts: list[str | Exchange] = [p.text for p in prepared.prompts][:n]
        candidates = [c.text for p in prepared.prompts for c in prepared.all_candidates(p)]
        drawn: list[str | Exchange] = list(random.Random(args.seed).sample(candidates, n))
        batches = {"prompts": [prompts[i:i + cut] for i in range(0, len(prompts), cut)],
                   "candidates": [drawn[i:i + cut] for i in range(0, n, cut)]}
    if args.responses:
        responses = prepare_inputs(RunConfig(guard="keyword", dataset=args.responses, suite="standard",
                                             target="response"))
        rng = random.Random(args.seed)
        cases = rng.sample(list(responses.prompts), n)

        def some(case: Any, k: int) -> list[str | Exchange]:
            return [case.exchange(c.text) for c in rng.sample(list(responses.all_candidates(case)), k)]

        runs = [x for case in cases[:n // args.per_case] for x in some(case, args.per_case)]
        ones = [x for case in cases for x in some(case, 1)]
        batches[f"response candidates, {args.per_case} per case"] = [runs[i:i + cut] for i in range(0, n, cut)]
        batches["response candidates, 1 per case"] = [ones[i:i + cut] for i in range(0, n, cut)]
    return batches


def show(f: dict[str, Any]) -> None:
    print(f"Llama-Guard-3-8B-shaped model, size {f['size']} ({f['dtype']}, {f['threads']} torch thread(s)); "
          f"template {f['prefix_tokens']} tokens before the text, {f['after_tokens']} after; "
          f"load average {f['load_average']:.1f} at the start")
    for s in f["scenarios"]:
        print(f"\n{s['scenario']}: {s['texts']} texts in batches of {s['batch_size']}")
        print(f"  {'way':26} {'speedup':>8} {'cpu s':>7} {'wall s':>7} {'padding':>8} {'tok/text':>8}  "
              f"verdicts  raw   max|dp_unsafe|  max|dlogprob|")
        for way, w in s["ways"].items():
            print(f"  {way:26} {w['speedup']:7.2f}x {w['best_cpu_s']:7.2f} {w['best_wall_s']:7.2f} "
                  f"{100 * w['padding_share']:7.0f}% "
                  f"{w['tokens_run_per_text']:8.0f}  {'same' if w['verdicts_identical'] else 'DIFFER':8}  "
                  f"{'same' if w['raw_identical'] else 'DIFFER':4}  {w['p_unsafe_max_diff']:13.2e}  "
                  f"{w['logprob_max_diff']:12.2e}")
        n = s["batching_noise"]
        print(f"  {'(full: batch vs alone)':26} {'':8} {'':7} {'':7} {'':8} {'':8}  "
              f"{'same' if n['verdicts_identical'] else 'DIFFER':8}  {'same' if n['raw_identical'] else 'DIFFER':4}  "
              f"{n['p_unsafe_max_diff']:13.2e}  {n['logprob_max_diff']:12.2e}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from benchmarks import llama_guard_3

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="xstest", help="xstest (or MARGIN_XSTEST=PATH), sample, or a file")
    parser.add_argument("--size", default="small", choices=sorted(llama_guard_3.SIZES))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=3, help="batches per scenario")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--seed", type=int, default=0, help="which candidates are drawn")
    parser.add_argument("--model-dir", type=Path, help="where the model is built (default: a temporary folder)")
    parser.add_argument("--responses", help="a labelled-completions CSV: add the response scenarios")
    parser.add_argument("--per-case", type=int, default=8, help="response candidates of one case per batch")
    parser.add_argument("--only-responses", action="store_true", help="only the response scenarios")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    load = os.getloadavg()[0]
    batches = make_batches(args)
    with tempfile.TemporaryDirectory(prefix="margin-prefix-") as tmp:
        path = llama_guard_3.build(args.model_dir or Path(tmp) / "model", args.size)
        guards = {prefix: load_guard(path, prefix, args.dtype) for prefix in (False, True)}
        prefix_tokens = guards[True].prefix_tokens[0]
        whole = len(guards[True].backend.render(guards[True].adapter.request("x")))  # type: ignore[attr-defined]
        figures = {"size": args.size, "dtype": args.dtype, "threads": args.threads, "load_average": load,
                   "prefix_tokens": prefix_tokens, "after_tokens": whole - prefix_tokens - 1,
                   "scenarios": [scenario(name, b, guards, args.repeats) for name, b in batches.items()]}
    figures["load_average_end"] = os.getloadavg()[0]
    show(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, default=lambda x: None if math.isnan(x) else x) + "\n")
    return figures


if __name__ == "__main__":
    main()
