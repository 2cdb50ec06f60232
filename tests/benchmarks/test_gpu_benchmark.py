"""benchmarks/gpu.py: its FLOP count, and the whole script end to end on a CPU.

The full-size run needs a GPU; `--tiny` runs the same code on a 2-layer model, in this
process's engine, with Ray made unimportable, to show the script works without it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.gpu import Shape, count_work
from tests.support.paths import REPO

SHAPE = Shape(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128, vocab=500)


def test_span_flops_sum_each_token_at_its_position():
    w, attn = SHAPE.matrix_weights, 4 * SHAPE.layers * SHAPE.heads * SHAPE.head_dim
    assert w == 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128)
    by_hand = sum(2 * w + attn * (p + 1) for p in range(10, 17))
    assert SHAPE.span_flops(10, 7) == by_hand
    assert SHAPE.span_flops(5, 0) == 0


def test_count_work_shares_the_prefix_once():
    prefix, head = 100, SHAPE.head_flops
    work = count_work(SHAPE, prefix, [(130, 3, True), (120, 3, False)])
    assert work.texts == 2
    assert work.unique_tokens == 100 + (30 + 2) + (120 + 2)
    shared = SHAPE.span_flops(100, 30) + SHAPE.span_flops(130, 2) + 3 * head
    whole = SHAPE.span_flops(0, 120) + SHAPE.span_flops(120, 2) + 3 * head
    assert work.flops == pytest.approx(SHAPE.span_flops(0, 100) + head + shared + whole)
    assert work.full_flops == pytest.approx(shared + SHAPE.span_flops(0, 100) + whole)


@pytest.mark.slow
def test_the_flop_count_matches_torchs_counter_on_a_real_forward():
    import torch
    import transformers
    from torch.utils.flop_counter import FlopCounterMode

    config = transformers.LlamaConfig(vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2)
    config._attn_implementation = "eager"  # attention as plain matmuls, which the counter sees
    model = transformers.LlamaForCausalLM(config).eval()
    shape = Shape.of(config)
    assert shape == SHAPE
    n = 24
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        model(input_ids=torch.arange(n)[None], logits_to_keep=1)
    # torch counts attention as the full n x n square; margin counts each query's causal span.
    square = 4 * shape.layers * shape.heads * shape.head_dim * n * n
    causal = 4 * shape.layers * shape.heads * shape.head_dim * n * (n + 1) // 2
    assert counter.get_total_flops() == shape.span_flops(0, n) - causal + square + shape.head_flops


@pytest.mark.slow
def test_the_script_runs_end_to_end_on_a_cpu_without_ray(tmp_path):
    code = ("import sys, runpy; sys.modules['ray'] = None; sys.argv = ['benchmarks.gpu'] + sys.argv[1:]; "
            "runpy.run_module('benchmarks.gpu', run_name='__main__')")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", code, "--tiny", "--engine", "local", "--dataset", "sample",
                           "--suite", "quick", "--limit", "2", "--work", str(tmp_path / "work"), "--out", str(out),
                           "--json", str(tmp_path / "figures.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    f = json.loads((tmp_path / "figures.json").read_text())
    calls = [json.loads(line) for line in (out / "receipts.jsonl").read_text().splitlines() if '"kind": "call"' in line]
    assert f["texts"] == len(calls) > 20 and f["engine"] == "local" and f["dtype"] == "bfloat16"
    assert f["answered_like_llama_guard"] == f["texts"] == f["shared"]  # every text: "\n\nsafe<|eot_id|>", prefix shared
    assert all(c["verdict"] == "safe" and c["raw"] == "\n\nsafe<|eot_id|>" for c in calls)
    assert f["prefix_tokens"] > 100 and f["unique_tokens"] < f["texts"] * 100
    assert 0 < f["flops"] < f["full_flops"] and 0 <= f["driver_share"] < 1
    for line in ("texts/s", "unique tokens/s", "achieved TFLOP/s", "driver share"):
        assert line in proc.stdout
    # The plan counts the same work without building or running a model.
    from benchmarks.gpu import main

    planned = main(["--plan", "--tiny", "--dataset", "sample", "--suite", "quick", "--limit", "2"])
    assert {k: planned[k] for k in ("texts", "prefix_tokens", "unique_tokens")} == \
        {k: f[k] for k in ("texts", "prefix_tokens", "unique_tokens")}
    assert planned["flops"] == pytest.approx(f["flops"])
