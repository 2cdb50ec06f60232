"""`--limit N`: a stratified, seeded sample (both labels in the dataset's proportions), said
in the run's output and run.json, rebuilt by score and merge."""

from __future__ import annotations

import json
from collections import Counter

import pytest

import margin
from margin.datasets import load_dataset
from margin.runs.preparing.subset import limit_prompts, quotas
from margin.runs.recording.merge import merge_runs
from margin.runs.recording.score import rescore
from margin.types import Prompt
from tests.support.cli import margin as margin_cli


def labels(prompts) -> Counter:
    return Counter(p.label for p in prompts)


def test_the_sample_limited_to_10_keeps_both_labels_seeded_and_in_dataset_order():
    prompts = load_dataset("sample").prompts  # 24 safe, then 24 unsafe: the first 10 were all safe
    chosen = limit_prompts(prompts, 10, seed=0)
    assert labels(chosen) == {"safe": 5, "unsafe": 5}
    assert chosen == limit_prompts(prompts, 10, seed=0)  # deterministic
    order = [p.id for p in prompts]
    assert [p.id for p in chosen] == sorted((p.id for p in chosen), key=order.index)
    other = limit_prompts(prompts, 10, seed=1)
    assert labels(other) == labels(chosen) and other != chosen  # the seed draws another sample
    assert limit_prompts(prompts, 48, seed=0) == limit_prompts(prompts, 100, seed=0) == prompts
    assert limit_prompts(prompts, 10, seed=0, method="first") == prompts[:10]


@pytest.mark.parametrize(("sizes", "n", "expected"), [
    ({"safe": 250, "unsafe": 200}, 9, {"safe": 5, "unsafe": 4}),  # XSTest: exact
    ({"safe": 250, "unsafe": 200}, 10, {"safe": 6, "unsafe": 4}),  # 5.56 / 4.44: largest remainder
    ({"safe": 24, "unsafe": 24}, 7, {"safe": 4, "unsafe": 3}),  # a tie goes to the label sorting first
    ({"safe": 99, "unsafe": 1}, 2, {"safe": 1, "unsafe": 1}),  # every label at least once when N allows
    ({"safe": 99, "unsafe": 1}, 1, {"safe": 1, "unsafe": 0}),
])
def test_quotas_follow_the_dataset_proportions(sizes, n, expected):
    assert quotas(sizes, n) == expected


def test_a_rare_label_is_drawn_among_many():
    prompts = tuple(Prompt(f"p{i}", f"text {i}", "unsafe" if i == 77 else "safe") for i in range(100))
    assert [p.id for p in limit_prompts(prompts, 3, seed=5) if p.label == "unsafe"] == ["p77"]


def test_a_limited_run_says_so_in_its_output_and_run_json_and_score_and_merge_rebuild_it(tmp_path):
    out = tmp_path / "kw"
    proc = margin_cli("run", "--guard", "keyword", "--suite", "quick", "--limit", "10", "--seed", "3",
                      "--engine", "local", "--no-cache", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "--limit: a stratified sample of 10 of 48 prompts (5 safe, 5 unsafe" in proc.stdout
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["limit"] == 10 and manifest["seed"] == 3
    assert manifest["limit_sample"] == {"method": "stratified", "by_label": {"safe": 5, "unsafe": 5}}
    full = margin.run("keyword", suite="quick", seed=3, engine="local", cache=False, out=tmp_path / "full")
    assert manifest["corpus_mean_length"] == json.loads((tmp_path / "full" / "run.json").read_text())["corpus_mean_length"]
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    expected = [p.id for p in limit_prompts(load_dataset("sample").prompts, 10, seed=3)]
    assert [r["prompt_id"] for r in results] == expected
    by_id = {r.prompt_id: r.flip_cost for r in full.results}
    assert [r["flip_cost"] for r in results] == [by_id[i] for i in expected]  # the same units as a full run
    rescored = rescore([out])
    assert [r.prompt_id for r in rescored.results] == expected and not rescored.differs_from_run
    merged = merge_runs([out], tmp_path / "merged")
    assert [r.prompt_id for r in merged.results] == expected


def test_a_run_made_before_the_sample_is_rescored_on_its_first_n_prompts(tmp_path):
    out = tmp_path / "old"
    margin.run("keyword", suite="quick", limit=6, limit_method="first", engine="local", cache=False, out=out)
    manifest = json.loads((out / "run.json").read_text())
    assert "limit_sample" not in manifest and manifest["limit"] == 6  # what such a run recorded
    rescored = rescore([out])
    assert [r.prompt_id for r in rescored.results] == [p.id for p in load_dataset("sample").prompts[:6]]
    assert not rescored.differs_from_run
