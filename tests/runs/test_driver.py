"""The engine's driver, cache, resume, shards and merge, in this process (no Ray)."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.cost import CostModel
from margin.datasets import load_dataset
from margin.engine.book import Outcome
from margin.engine.calls import call_batch
from margin.engine.loop import run_pools
from margin.errors import InputError
from margin.guards.spec import GuardSpec
from margin.runfolder import ReceiptWriter, read_jsonl
from margin.runs.executing.execute import execute
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare
from margin.runs.preparing.shards import parse_shard, select_shard
from margin.runs.recording.merge import merge_runs
from margin.runs.recording.outputs import CoverageError, check_coverage
from margin.search.candidates import build_candidates, original_candidate
from margin.search.make import make_search
from margin.search.strategies import WINDOW_GROWTH
from margin.serving.driver import Driver
from margin.serving.guard_pool import local_pool
from margin.serving.replay import load_replay
from margin.serving.verdict_cache import VerdictCache, guard_key, verdict_key
from margin.transforms.suites import load_suite
from margin.types import Candidate, GuardCall, GuardInfo, Verdict
from margin.util.hashing import canonical_json, sha256_text
from tests.support.guards import FlakyGuard, HashGuard

SAMPLE = load_dataset("sample").prompts


def searches_for(strategy, prompts, suite="quick", budget=100.0):
    suite_obj = load_suite(suite)
    model = CostModel.for_corpus([p.text for p in SAMPLE])
    return [make_search(strategy, p, original_candidate(p, 0), build_candidates(p, suite_obj, model, budget, 0),
                        budget) for p in prompts]


def run_local(driver, guard, batch_size):
    run_pools(driver.book, [local_pool(guard, batch_size)])


def in_process(strategy, prompts, guard, batch_size=16, **kwargs):
    driver = Driver(searches_for(strategy, prompts), retry_wait_s=0, **kwargs)
    run_local(driver, guard, batch_size)
    return driver


def chaotic(strategy, prompts, guard, rng: random.Random):
    """Batches of random size, several in flight, answered in random order, texts shuffled."""
    driver = Driver(searches_for(strategy, prompts), retry_wait_s=0)
    book = driver.book
    inflight = []
    while not driver.finished:
        if not inflight or rng.random() < 0.5:
            taken = book.take("guard", rng.randint(1, 9))
            if taken:
                inflight.append(taken)
                continue
            assert inflight, "driver is stuck"
        batch = inflight.pop(rng.randrange(len(inflight)))
        result = call_batch(guard_caller(guard), [t.request for t in batch])
        items = [Outcome(t.key, t.attempt, v, 0.0, e) for t, v, e in zip(batch, result.outputs, result.errors, strict=True)]
        rng.shuffle(items)
        book.deliver(items)
    return driver.ordered_results()


def guard_caller(guard):
    from margin.serving.guard_pool import GuardCaller

    return GuardCaller(guard)


@settings(max_examples=20, deadline=None)
@given(st.sampled_from(["cheapest", "exhaustive"]), st.floats(0.0, 1.0), st.integers(0, 10**6))
def test_results_do_not_depend_on_batching_or_arrival_order(strategy, share, seed):
    prompts = SAMPLE[:10]
    guard = HashGuard(share, invalid_share=0.05, salt=str(seed % 7))
    reference = in_process(strategy, prompts, guard).ordered_results()
    assert chaotic(strategy, prompts, guard, random.Random(seed)) == reference  # guard_calls included


@pytest.mark.parametrize("share", [0.5, 0.1, 0.9])
def test_cheapest_overshoots_the_fewest_exact_calls_by_at_most_the_window_share(share):
    """An exact search must query the original, every candidate before the flip and the flip
    (or every candidate when nothing flips); batching may add at most WINDOW_GROWTH of that."""
    searches = searches_for("cheapest", SAMPLE, suite="standard")
    driver = Driver(searches, retry_wait_s=0)
    run_local(driver, HashGuard(share, salt="w"), 64)
    for search, result in zip(searches, driver.ordered_results(), strict=True):
        if result.flip_cost == 0:
            needed = 1
        elif result.capped:
            needed = 1 + len(search.candidates)
        else:
            needed = 2 + next(i for i, c in enumerate(search.candidates) if search.verdicts.get(c)
                              and search.verdicts[c].is_wrong_for(search.prompt.label))
        assert needed <= result.guard_calls <= needed + needed * WINDOW_GROWTH


def test_searches_start_as_the_guard_needs_work_and_are_forgotten_when_done():
    """Flat memory: the driver holds only the searches that keep the guard's calls full
    (`backlog` requests waiting), whatever the number of prompts."""
    prompts = [dataclasses.replace(p, id=f"{p.id}-{i}", text=f"{p.text} ({i})") for i in range(4) for p in SAMPLE]
    guard, started = HashGuard(0.3, salt="m"), []

    def searches():
        for search in searches_for("cheapest", prompts):
            started.append(search.prompt.id)
            yield search

    driver = Driver(searches(), total=len(prompts), backlog=8, retry_wait_s=0)
    caller, held = guard_caller(guard), []
    while not driver.finished:
        held.append(len(driver.searches))
        batch = driver.book.take("guard", 8)
        result = call_batch(caller, [t.request for t in batch])
        driver.book.deliver(Outcome(t.key, t.attempt, v, 0.0, e) for t, v, e in zip(batch, result.outputs, result.errors, strict=True))
    assert max(held) <= 8 + 8 < len(prompts)  # waiting + in the call: each search waits for one answer at least
    assert held[0] == 8 and not driver.searches and started == [p.id for p in prompts]
    assert driver.ordered_results() == in_process("cheapest", prompts, guard).ordered_results()


def test_a_text_asked_for_by_two_prompts_is_sent_once():
    twin = SAMPLE[0].__class__("twin", SAMPLE[0].text, SAMPLE[0].label)
    guard = HashGuard(0.5)
    driver = in_process("exhaustive", [SAMPLE[0], twin], guard)
    assert len(guard.seen) == len(set(guard.seen))
    a, b = driver.ordered_results()
    assert (a.flip_cost, a.guard_calls) == (b.flip_cost, b.guard_calls)
    assert driver.stats.cache_hits == b.guard_calls


# -- cache ----------------------------------------------------------------------------------

INFO = GuardInfo(id="g", family="f", checkpoint="c", revision="r", backend="python", threshold=0.5)


def test_cache_keys_use_the_exact_text_and_the_verdict_deciding_identity():
    key = guard_key(INFO)
    composed, decomposed = "caf\u00e9", unicodedata.normalize("NFD", "caf\u00e9")
    assert verdict_key(key, composed) != verdict_key(key, decomposed)  # never normalised
    assert verdict_key(key, "\ud800") != verdict_key(key, "\\ud800")  # lone surrogate vs its spelling
    assert verdict_key(key, "a ") != verdict_key(key, "a")  # never trimmed
    for changed in ({"threshold": 0.6}, {"revision": "r2"}, {"template_sha256": "t"}, {"params": (("k", "v"),)}):
        assert guard_key(_replace(INFO, changed)) != key
    # caveats describe a guard; they never change a verdict
    assert guard_key(_replace(INFO, {"caveats": ("x",)})) == key


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text(max_size=8))
def test_a_cache_key_is_the_sha256_of_the_canonical_json_of_guard_and_text(text, guard):
    """Keys are written out without building the dict: the same bytes, so caches made
    before stay valid."""
    assert verdict_key(guard, text) == sha256_text(canonical_json({"guard": guard, "text": text}))


def test_the_cache_answers_many_texts_in_one_look_up(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite", INFO)
    stored = {f"text {i}": Verdict("unsafe" if i % 3 else "safe", i / 1200, str(i)) for i in range(1200)}
    cache.put_many(stored.items())
    asked = [*stored, "never stored", "text 5"]  # past one query's 500 keys; a repeat
    assert cache.get_many(asked) == stored


def _replace(info: GuardInfo, changes: dict) -> GuardInfo:
    return dataclasses.replace(info, **changes)


def test_cache_round_trip_across_connections(tmp_path):
    path = tmp_path / "v.sqlite"
    cache = VerdictCache(path, INFO)
    cache.put_many([("hello \u200b", Verdict("unsafe", 0.9, "raw"))])
    cache.close()
    again = VerdictCache(path, INFO)
    assert again.get("hello \u200b") == Verdict("unsafe", 0.9, "raw")
    assert again.get("hello ") is None
    assert VerdictCache(path, _replace(INFO, {"threshold": 0.7})).get("hello \u200b") is None


def test_only_completed_outputs_are_cached(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite", INFO)
    dropped = SAMPLE[1].text
    driver = in_process("cheapest", SAMPLE[:3], FlakyGuard(HashGuard(0.5), fail_every=0, drop_text=dropped),
                        cache=cache, max_attempts=2)
    assert driver.ordered_results()[1].status == "missing"
    assert cache.get(dropped) is None
    assert cache.get(SAMPLE[0].text) is not None


# -- runs: cache, resume, shards, merge (library, local engine) -----------------------------

class Crash(BaseException):
    """Stands for the process dying: not an Exception, so no retry catches it."""


class CrashingGuard(HashGuard):
    def __init__(self, after_calls: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.after_calls = after_calls
        self.calls = 0

    def classify(self, texts):
        self.calls += 1
        if self.calls > self.after_calls:
            raise Crash
        return super().classify(texts)


def local_run(out: Path, guard, *, resume=False, **config):
    settings = {"dataset": "sample", "suite": "quick", "engine": "local", "retry_wait_s": 0.0,
                "batch_size": 8, "cache": False, **config}
    prepared = prepare(RunConfig.of(guard=GuardSpec(name="keyword"), **settings), guard=guard)
    return execute(prepared, out, resume=resume)


def test_second_run_is_answered_from_the_cache(tmp_path):
    cache = tmp_path / "cache.sqlite"
    first = local_run(tmp_path / "a", HashGuard(0.4), cache=True, cache_path=cache)
    guard = HashGuard(0.4)
    second = local_run(tmp_path / "b", guard, cache=True, cache_path=cache)
    assert guard.seen == [] and second.guard_calls == 0
    calls = [r for r in read_jsonl(tmp_path / "b" / "receipts.jsonl") if r["kind"] == "call"]
    assert calls and all(r["cached"] for r in calls) and second.cache_hits == len(calls)
    assert (tmp_path / "a" / "results.jsonl").read_bytes() == (tmp_path / "b" / "results.jsonl").read_bytes()
    assert first.cache_hits == 0
    third = HashGuard(0.4)
    local_run(tmp_path / "c", third, cache=False, cache_path=cache)
    assert third.seen  # --no-cache reads nothing


def test_resume_after_a_crash_matches_an_uninterrupted_run_and_repeats_no_call(tmp_path):
    local_run(tmp_path / "whole", HashGuard(0.3))
    crashing = CrashingGuard(after_calls=9, unsafe_share=0.3)
    with pytest.raises(Crash):
        local_run(tmp_path / "part", crashing)
    receipts = tmp_path / "part" / "receipts.jsonl"
    recorded = {r["text_sha256"] for r in read_jsonl(receipts) if r["kind"] == "call" and not r["cached"]}
    assert recorded
    with open(receipts, "a", encoding="utf-8") as handle:
        handle.write('{"kind": "call", "prompt_id": "torn')  # the writer died mid-line
    resumed = HashGuard(0.3)
    outcome = local_run(tmp_path / "part", resumed, resume=True)
    assert not recorded & {sha256_text(t) for t in resumed.seen}
    assert outcome.missing == 0
    assert (tmp_path / "whole" / "results.jsonl").read_bytes() == (tmp_path / "part" / "results.jsonl").read_bytes()
    lines = list(read_jsonl(receipts))  # no torn line left in the middle
    assert sum(1 for r in lines if r["kind"] == "result") == len(SAMPLE)
    assert len({r["run_id"] for r in lines}) == 1


def test_resume_counts_only_the_failures_that_used_up_an_attempt(tmp_path):
    receipts = tmp_path / "receipts.jsonl"
    writer = ReceiptWriter(receipts, "run", "guard")
    waited, failed = (Candidate("p", None, None, 0, text, 0.0) for text in ("waited", "failed"))
    writer.call(GuardCall(waited, None, 1, 0.1, "HTTP 429", charged=False))
    writer.call(GuardCall(waited, None, 2, 0.1, "HTTP 429", charged=False))
    writer.call(GuardCall(failed, None, 1, 0.1, "HTTP 500"))
    writer.close()
    with open(receipts, "a", encoding="utf-8") as handle:  # a line written before receipts said which
        line = json.loads(receipts.read_text().splitlines()[0])
        del line["charged"]
        handle.write(json.dumps({**line, "attempt": 3}) + "\n")
    replay = load_replay(receipts)
    assert (replay.failed_attempts("waited"), replay.uncharged("waited")) == (3, 2)  # the old line: charged
    assert (replay.failed_attempts("failed"), replay.uncharged("failed")) == (1, 0)


@pytest.mark.parametrize(("change", "flag"), [({"budget": 50.0}, "--budget"), ({"suite": "standard"}, "--suite"),
                                              ({"seed": 1}, "--seed"), ({"guard_salt": "x"}, "--guard")])
def test_resume_refuses_a_changed_run(tmp_path, change, flag):
    local_run(tmp_path / "r", HashGuard(0.3), limit=3)
    salt = change.pop("guard_salt", "")
    with pytest.raises(InputError, match=flag):
        local_run(tmp_path / "r", HashGuard(0.3, salt=salt), resume=True, limit=3, **change)


def test_shards_are_a_deterministic_partition():
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "x", "1/0", "1-3"):
        with pytest.raises(InputError, match="--shard"):
            parse_shard(bad)
    parts = [select_shard(SAMPLE, (i, 3)) for i in (1, 2, 3)]
    assert sorted(p.id for part in parts for p in part) == sorted(p.id for p in SAMPLE)
    assert parts[0] == select_shard(SAMPLE, (1, 3))


def test_merged_shards_equal_the_whole_run_and_a_later_folder_wins(tmp_path):
    local_run(tmp_path / "whole", HashGuard(0.3))
    shards = [tmp_path / f"s{i}" for i in (1, 2, 3)]
    for i, out in enumerate(shards, start=1):
        local_run(out, HashGuard(0.3), shard=(i, 3))
    merged = merge_runs(shards, tmp_path / "merged")
    assert (tmp_path / "whole" / "results.jsonl").read_bytes() == (tmp_path / "merged" / "results.jsonl").read_bytes()
    whole_snapshot = json.loads((tmp_path / "whole" / "snapshot.json").read_text())
    assert merged.snapshot.document()["data"] == whole_snapshot["data"] and merged.absent == 0

    retry = tmp_path / "retry"
    shutil.copytree(shards[1], retry)
    rows = [json.loads(line) for line in (retry / "results.jsonl").read_text().splitlines()]
    rows[0]["guard_calls"] = 999
    (retry / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    again = merge_runs([*shards, retry], tmp_path / "merged2")
    assert again.replaced == len(rows)
    assert next(r for r in again.results if r.prompt_id == rows[0]["prompt_id"]).guard_calls == 999

    partial = merge_runs(shards[:2], tmp_path / "merged3")
    assert partial.absent == len(select_shard(SAMPLE, (3, 3)))
    assert partial.snapshot.document()["data"][0]["coverage"]["missing"] == partial.report.missing
    with pytest.raises(CoverageError, match="above --max-missing 1%"):
        check_coverage(partial.results, 0.01)


def test_merge_refuses_different_runs(tmp_path):
    local_run(tmp_path / "a", HashGuard(0.3), shard=(1, 2))
    local_run(tmp_path / "b", HashGuard(0.3), shard=(2, 2), budget=50.0)
    with pytest.raises(InputError, match="--budget"):
        merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "m")
    assert not (tmp_path / "m").exists()
