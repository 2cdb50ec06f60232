"""A whole margin run on one GPU, in one command: how fast, and how close to the card's peak.

    python -m benchmarks.gpu --dataset PATH/xstest_prompts.csv      # or MARGIN_XSTEST=PATH
    python -m benchmarks.gpu --tiny --dataset sample --suite quick   # CPU: proves the script works

A Llama-Guard-3-8B-shaped model with random weights is built on the spot (`--size 8b`, the
default: Llama 3.1 8B's shape, Llama Guard 3-8B's chat template on a tokenizer trained
here, weights that answer `safe` as the real model does; nothing is downloaded; see
`benchmarks.llama_guard_3`) and saved under `--work`, where later runs reuse it. margin then
runs the `llama-guard-3-8b` preset on it with the transformers backend in bf16, shared-prefix
reuse on: XSTest, the standard suite, `cheapest` search, the verdict cache off, on Ray
(`--engine ray`, one guard actor with the GPU) or in this process (`--engine local`, which
needs no Ray installed).

It prints texts/s, unique tokens/s, achieved TFLOP/s against the card's bf16 dense peak
(`--peak-tflops`, 989 for an H100 or H200) and the driver's share of wall time:

- unique tokens: what the model has to compute at least, once the template prefix is shared:
  the prefix once, then per text sent its tokens after the prefix and its generated tokens
  but the last (each one is fed back once); padding is not counted;
- FLOPs: for each of those tokens, 2 x the weights of every layer's matrices, plus attention
  (4 x heads x head size x the tokens it attends to, per layer), plus the output head
  (2 x hidden x vocabulary) for each token whose logits are computed (one per generated token);
- achieved TFLOP/s: those FLOPs over the search's wall time (first call to last result,
  model loading excluded), and over the guard's summed compute time;
- the driver's share: 1 - guard compute time / search wall time.

Goal on one H100: the whole run (guard loaded, searched, results written) under 5 minutes,
and at least 40% of peak on the unique tokens over the search's wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from margin.types import GuardCall

H100_BF16_DENSE_TFLOPS = 989.0
GOAL_RUN_S = 300.0
GOAL_PEAK_SHARE = 0.40


@dataclass(frozen=True)
class Shape:
    """What the FLOPs of a Llama-shaped decoder depend on."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    @classmethod
    def of(cls, config: Any) -> Shape:
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
                   config.num_key_value_heads, head_dim, config.intermediate_size, config.vocab_size)

    @property
    def matrix_weights(self) -> int:
        """Weights of every layer's matrices (attention projections and MLP), all layers."""
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        per_layer = self.hidden * q + 2 * self.hidden * kv + q * self.hidden + 3 * self.hidden * self.intermediate
        return self.layers * per_layer

    def span_flops(self, start: int, count: int) -> float:
        """FLOPs of `count` tokens at positions start, start+1, ... (each attends to itself
        and every token before it), without the output head."""
        if count <= 0:
            return 0.0
        attended = count * start + count * (count + 1) // 2  # sum of (position + 1)
        return 2.0 * self.matrix_weights * count + 4.0 * self.layers * self.heads * self.head_dim * attended

    @property
    def head_flops(self) -> float:
        return 2.0 * self.hidden * self.vocab


@dataclass(frozen=True)
class Work:
    texts: int
    unique_tokens: int
    flops: float
    full_flops: float  # the same texts with the prefix computed for each one


def count_work(shape: Shape, prefix: int, lengths: Sequence[tuple[int, int, bool]]) -> Work:
    """The useful work of a run: `lengths` holds, per text sent, its prompt's token count,
    its generated token count, and whether it shared the prefix (else it ran whole)."""
    tokens = prefix
    flops = shape.span_flops(0, prefix) + shape.head_flops  # the prefix, once (its last logits too)
    full = 0.0
    for prompt, generated, shared in lengths:
        start = prefix if shared else 0
        decode = max(generated - 1, 0)
        tokens += prompt - start + decode
        text = (shape.span_flops(start, prompt - start) + shape.span_flops(prompt, decode)
                + generated * shape.head_flops)
        flops += text
        full += text + (shape.span_flops(0, prefix) if shared else 0.0)
    return Work(len(lengths), tokens, flops, full)


def measure(tokenizer: Any, calls: Sequence[tuple[str, str]]) -> tuple[int, list[tuple[int, int, bool]]]:
    """Token counts of what was sent, rendered as the backend renders it: the shared prefix's
    length, and per (text, raw output) its prompt length, generated length and whether it
    starts with the prefix."""
    from margin.backends.prefix import PROBES, common_prefix
    from margin.guards.adapters.llama_guard import LlamaGuard

    adapter = LlamaGuard("3-8b")

    def render(texts: Sequence[str]) -> list[list[int]]:
        out: list[list[int]] = []
        for i in range(0, len(texts), 4096):  # in batches, which the tokenizer encodes in parallel
            out.extend(tokenizer.apply_chat_template([list(adapter.request(t).messages or ()) for t in texts[i:i + 4096]],
                                                     add_generation_prompt=True, tokenize=True, return_dict=False))
        return out

    common = common_prefix(render(PROBES))
    answers = tokenizer([raw for _, raw in calls], add_special_tokens=False)["input_ids"] if calls else []
    out = []
    for ids, answer in zip(render([text for text, _ in calls]), answers, strict=True):
        out.append((len(ids), len(answer), len(ids) > len(common) and tuple(ids[:len(common)]) == common))
    return len(common), out


def plan(args: argparse.Namespace, size: str, dataset: str) -> dict[str, Any]:
    """The run's work without running it: a guard that answers `safe` to everything is asked,
    under `cheapest`, every candidate of each safe prompt (nothing flips) and only the
    original of each unsafe one (wrong at once); each text once."""
    from benchmarks import llama_guard_3
    from margin.runs.preparing.config import RunConfig
    from margin.runs.preparing.prepare import prepare_inputs

    prepared = prepare_inputs(RunConfig(guard="keyword", dataset=dataset, suite=args.suite, limit=args.limit))
    texts = list(dict.fromkeys(
        [p.text for p in prepared.prompts]
        + [c.text for p in prepared.prompts if p.label == "safe" for c in prepared.all_candidates(p)]))
    answer = "".join(llama_guard_3.SAFE_ANSWER)
    tokenizer = llama_guard_3.train_tokenizer()
    prefix, lengths = measure(tokenizer, [(t, answer) for t in texts])
    shape = Shape.of(llama_guard_3.llama_config(size, tokenizer))
    work = count_work(shape, prefix, lengths)
    need = work.flops / GOAL_RUN_S / 1e12
    return {"size": size, "dataset": prepared.dataset.name, "prompts": len(prepared.prompts),
            "suite": prepared.suite.name, "texts": work.texts, "prefix_tokens": prefix,
            "unique_tokens": work.unique_tokens, "flops": work.flops, "full_flops": work.full_flops,
            "tflops_for_goal_time": need, "peak_share_for_goal_time": need / args.peak_tflops,
            "seconds_at_goal_share": work.flops / (GOAL_PEAK_SHARE * args.peak_tflops * 1e12)}


def show_plan(f: dict[str, Any]) -> None:
    print(f"plan, size {f['size']}: {f['dataset']} ({f['prompts']} prompts), {f['suite']} suite, cheapest, "
          f"a guard answering `safe`: {f['texts']:,} texts, {f['unique_tokens']:,} unique tokens "
          f"({f['prefix_tokens']}-token prefix shared), {f['flops'] / 1e15:,.1f} PFLOP "
          f"({f['full_flops'] / 1e15:,.1f} without prefix reuse)")
    print(f"the search in {GOAL_RUN_S:.0f} s needs {f['tflops_for_goal_time']:,.0f} TFLOP/s "
          f"({f['peak_share_for_goal_time']:.0%} of peak); at {GOAL_PEAK_SHARE:.0%} of peak it takes "
          f"{f['seconds_at_goal_share']:,.0f} s")


def dataset_arg(given: str | None) -> str:
    if given:
        return given
    env = os.environ.get("MARGIN_XSTEST")
    if env:
        return env
    raise SystemExit("benchmarks.gpu: give XSTest with --dataset PATH or MARGIN_XSTEST=PATH "
                     "(or --dataset sample for a quick check)")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    from benchmarks import llama_guard_3

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", help="XSTest's CSV (default: $MARGIN_XSTEST), sample, or any dataset file")
    parser.add_argument("--size", default="8b", choices=sorted(llama_guard_3.SIZES))
    parser.add_argument("--tiny", action="store_true", help="--size tiny: a 2-layer model a CPU runs in seconds")
    parser.add_argument("--engine", default="ray", choices=["ray", "local"])
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--suite", default="standard")
    parser.add_argument("--search", default="cheapest")
    parser.add_argument("--limit", type=int, help="a stratified sample of N prompts, as margin run --limit")
    parser.add_argument("--batch-size", type=int, default=1024, help="texts per guard call")
    parser.add_argument("--peak-tflops", type=float, default=H100_BF16_DENSE_TFLOPS,
                        help="the card's dense bf16 peak (H100 and H200 SXM: 989)")
    parser.add_argument("--work", type=Path, help="where the model is built and kept (default: a temporary folder)")
    parser.add_argument("--out", type=Path, help="the run folder (default: a temporary folder)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--plan", action="store_true",
                        help="only count the run's texts, tokens and FLOPs (no model is built or run)")
    args = parser.parse_args(argv)
    size = "tiny" if args.tiny else args.size
    dataset = dataset_arg(args.dataset)
    if args.plan:
        figures = plan(args, size, dataset)
        show_plan(figures)
    else:
        with tempfile.TemporaryDirectory(prefix="margin-gpu-") as tmp:
            figures = bench(args, size, dataset, Path(tmp))
        show(figures)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


def bench(args: argparse.Namespace, size: str, dataset: str, tmp: Path) -> dict[str, Any]:
    import torch

    from benchmarks import llama_guard_3
    from margin.guards.make import parse_guard_spec
    from margin.runs.executing.execute import execute
    from margin.runs.preparing.config import RunConfig
    from margin.runs.preparing.prepare import prepare

    device = "cuda" if torch.cuda.is_available() else "cpu"
    began = time.perf_counter()
    model_dir = llama_guard_3.build((args.work or tmp) / f"llama-guard-3-{size}-{args.dtype}", size,
                                    dtype=args.dtype, device=device)
    build_s = time.perf_counter() - began
    spec = parse_guard_spec("llama-guard-3-8b", model=str(model_dir), backend_options={"dtype": args.dtype},
                            num_gpus=1.0 if device == "cuda" and args.engine == "ray" else 0.0,
                            max_batch_size=args.batch_size)
    config = RunConfig.of(guard=spec, dataset=dataset, suite=args.suite, search=args.search, limit=args.limit,
                       cache=False, batch_size=args.batch_size, engine=args.engine)
    sent: list[tuple[str, str]] = []

    def on_call(call: GuardCall) -> None:
        if call.verdict is not None and not call.cached:
            sent.append((call.candidate.text, call.verdict.raw or ""))

    began = time.perf_counter()
    prepared = prepare(config)
    outcome = execute(prepared, args.out or tmp / "run", on_call=on_call)
    run_s = time.perf_counter() - began
    f = outcome.figures
    from transformers import AutoConfig, AutoTokenizer

    prefix, lengths = measure(AutoTokenizer.from_pretrained(model_dir), sent)
    shape = Shape.of(AutoConfig.from_pretrained(model_dir))
    work = count_work(shape, prefix, lengths)
    answered = sum(raw == "".join(llama_guard_3.SAFE_ANSWER) for _, raw in sent)
    peak = args.peak_tflops * 1e12
    return {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu", "size": size, "dtype": args.dtype,
        "engine": args.engine, "dataset": prepared.dataset.name, "prompts": len(prepared.prompts),
        "suite": prepared.suite.name, "search": args.search, "batch_size": args.batch_size,
        "parameters": shape.matrix_weights + 2 * shape.hidden * shape.vocab,
        "build_s": build_s, "run_s": run_s, "search_s": f.search_s, "compute_s": f.compute_s,
        "texts": work.texts, "answered_like_llama_guard": answered,
        "prefix_tokens": prefix, "shared": sum(s for _, _, s in lengths),
        "unique_tokens": work.unique_tokens, "flops": work.flops, "full_flops": work.full_flops,
        "texts_per_s": work.texts / f.search_s, "unique_tokens_per_s": work.unique_tokens / f.search_s,
        "tflops_wall": work.flops / f.search_s / 1e12, "tflops_compute": work.flops / f.compute_s / 1e12,
        "peak_tflops": args.peak_tflops, "peak_share_wall": work.flops / f.search_s / peak,
        "peak_share_compute": work.flops / f.compute_s / peak,
        "driver_share": 1 - f.compute_s / f.search_s, "batches": f.batches, "mean_fill": f.mean_fill,
        "balanced_margin": outcome.report.balanced_margin,
        "load_average": os.getloadavg()[0],
    }


def show(f: dict[str, Any]) -> None:
    print(f"{f['device']}: Llama-Guard-3-8B-shaped model, size {f['size']} ({f['parameters'] / 1e6:,.1f}M "
          f"parameters, {f['dtype']}), engine {f['engine']}, batches of {f['batch_size']}; "
          f"load average {f['load_average']:.1f}")
    print(f"{f['dataset']} ({f['prompts']} prompts), {f['suite']} suite, {f['search']}: {f['texts']:,} texts sent "
          f"({f['shared']:,} shared the {f['prefix_tokens']}-token prefix; "
          f"{f['answered_like_llama_guard']:,} answered like Llama Guard 3), balanced margin {f['balanced_margin']}")
    print(f"model built in {f['build_s']:.1f} s; whole run {f['run_s']:.1f} s (goal < {GOAL_RUN_S:.0f} s on one H100), "
          f"search {f['search_s']:.1f} s, guard compute {f['compute_s']:.1f} s")
    print(f"texts/s            {f['texts_per_s']:,.1f}")
    print(f"unique tokens/s    {f['unique_tokens_per_s']:,.0f}   ({f['unique_tokens']:,} tokens; prefix reuse "
          f"saves {1 - f['flops'] / f['full_flops']:.0%} of the FLOPs)")
    print(f"achieved TFLOP/s   {f['tflops_wall']:.3g} over wall = {f['peak_share_wall']:.1%} of "
          f"{f['peak_tflops']:.0f} (goal >= {GOAL_PEAK_SHARE:.0%}); {f['tflops_compute']:.3g} over guard compute "
          f"= {f['peak_share_compute']:.1%}")
    print(f"driver share       {f['driver_share']:.1%} of the search's wall time "
          f"({f['batches']} batches, {100 * (f['mean_fill'] or 0):.0f}% full)")


if __name__ == "__main__":
    main(sys.argv[1:])
