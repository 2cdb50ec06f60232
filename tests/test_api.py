"""The Python face: margin.run / margin.study / margin.load_run / margin.load_snapshots."""

from __future__ import annotations

import json

import pytest

import margin
from margin.errors import InputError
from tests.support.guards import HashGuard


def test_run_then_load_run_gives_the_folder_as_frames(tmp_path):
    outcome = margin.run("keyword", dataset="sample", suite="quick", engine="local", cache=False, out=tmp_path / "kw")
    run = margin.load_run(tmp_path / "kw")
    assert run.guard.id == "keyword" and run.manifest["suite"]["name"] == "quick"
    assert run.results.height == 48 == len(outcome.results)
    on_disk = [json.loads(line) for line in (tmp_path / "kw" / "results.jsonl").read_text().splitlines()]
    assert run.results["flip_cost"].to_list() == [r["flip_cost"] for r in on_disk]
    receipts = run.receipts()
    assert receipts.height >= sum(r["guard_calls"] for r in on_disk) - receipts["cached"].sum()
    assert run.snapshot["data"][0]["balanced_margin"] == outcome.report.balanced_margin


def test_an_unknown_run_option_is_one_error_naming_it(tmp_path):
    with pytest.raises(InputError, match=r"margin.run takes no option 'max_call'; did you mean max_calls") as caught:
        margin.run("keyword", dataset="sample", search="adaptive", max_call=5, out=tmp_path / "kw")
    assert caught.value.field == "max_call" and not (tmp_path / "kw").exists()
    with pytest.raises(InputError, match="only --search adaptive or bon takes --max-calls"):
        margin.run("keyword", dataset="sample", search="cheapest", max_calls=5, out=tmp_path / "kw")


def test_a_guard_instance_runs_as_it_is(tmp_path):
    guard = HashGuard(0.3)
    outcome = margin.run(guard, dataset="sample", suite="quick", engine="local", cache=False, out=tmp_path / "h")
    assert outcome.snapshot.document()["data"][0]["id"] == guard.info.id and guard.seen


def test_load_snapshots_is_one_frame_with_intervals_and_protocol_columns(tmp_path):
    for name, share in (("a", 0.2), ("b", 0.6)):
        margin.run(HashGuard(share, salt=name), dataset="sample", suite="quick", engine="local", cache=False,
                   out=tmp_path / name)
    table = margin.load_snapshots(str(tmp_path / "*" / "snapshot.json"))
    assert table.height == 2 and set(table["protocol"]) == {"margin-flip-cost/1"}
    for name in ("balanced_margin", "unsafe_margin", "safe_margin", "clean_balanced_accuracy"):
        assert (table[f"{name}_low"] <= table[name]).all() and (table[name] <= table[f"{name}_high"]).all()
    assert set(table["suite"]) == {"quick"} and table["dataset_sha256"].n_unique() == 1
    with pytest.raises(InputError, match="no snapshot"):
        margin.load_snapshots(str(tmp_path / "nothing-*.json"))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(InputError, match="not a margin snapshot"):
        margin.load_snapshots(tmp_path / "bad.json")


def test_run_and_study_work_under_a_running_asyncio_loop_with_the_cache_on(tmp_path):
    """A notebook's cell runs inside an asyncio loop: the engine then runs in a thread of its
    own, while the caches were opened in the caller's thread."""
    import asyncio

    from tests.support.study import study_config, toy_server, write_config

    async def in_a_notebook():
        first = margin.run("keyword", dataset="sample", suite="quick", engine="local", out=tmp_path / "kw")
        again = margin.run("keyword", dataset="sample", suite="quick", engine="local", out=tmp_path / "again")
        with toy_server() as url:
            config = write_config(tmp_path, study_config(url))
            studied = margin.study(config, engine="local", out=tmp_path / "study")
            studied_again = margin.study(config, engine="local", out=tmp_path / "study-again")
        return first, again, studied, studied_again

    first, again, studied, studied_again = asyncio.run(in_a_notebook())
    assert again.results == first.results
    cached = [json.loads(line)["cached"] for line in (tmp_path / "again" / "receipts.jsonl").read_text().splitlines()
              if '"kind": "call"' in line]
    assert cached and all(cached)  # the second run was answered from the verdict cache
    assert studied_again.pairings["data"] == studied.pairings["data"] and studied_again.calls.sent == 0


def test_polars_reads_a_real_runs_receipts_with_margins_schema(tmp_path):
    """receipts.jsonl mixes call and result lines, and columns stay null for hundreds of lines
    (a flip, an error): polars' guess from the first 100 lines fails on it; the schema does not."""
    import polars as pl

    from margin.runfolder import read_jsonl
    from tests.support.guards import FlakyGuard, ProbabilityGuard

    guard = FlakyGuard(ProbabilityGuard(), fail_every=7)
    margin.run(guard, dataset="sample", suite="standard", engine="local", cache=False, retry_wait_s=0.0,
               out=tmp_path / "p")
    path = tmp_path / "p" / "receipts.jsonl"
    lines = list(read_jsonl(path))
    schema = margin.receipts_schema()
    assert all(set(line) <= set(schema) for line in lines)  # every field has a column and a type
    frame = pl.read_ndjson(path, schema=schema)
    assert frame.to_dicts() == [{name: line.get(name) for name in schema} for line in lines]
    kinds = frame["kind"].value_counts()
    assert dict(zip(kinds["kind"], kinds["count"], strict=True)).keys() == {"call", "result"}
    assert frame["flip"].drop_nulls().len() > 0 and frame["error"].drop_nulls().len() > 0
    assert frame["p_unsafe"].drop_nulls().len() > 0
    calls = margin.load_run(tmp_path / "p").receipts()
    assert calls.height == sum(line["kind"] == "call" for line in lines) and set(calls["kind"]) == {"call"}
    assert "flip" not in calls.columns and calls["cached"].dtype == pl.Boolean


def test_load_snapshots_names_two_runs_of_one_guard_apart(tmp_path):
    for name in ("kw", "kw-again"):
        margin.run(HashGuard(0.3), dataset="sample", suite="quick", engine="local", cache=False, out=tmp_path / name)
    margin.run(HashGuard(0.3, salt="other"), dataset="sample", suite="quick", engine="local", cache=False,
               out=tmp_path / "other")
    table = margin.load_snapshots(str(tmp_path / "*" / "snapshot.json"))
    ids = dict(zip(table["snapshot"].map_elements(lambda p: p.split("/")[-2], return_dtype=str), table["guard"],
                   strict=True))
    assert ids["kw"] == ids["kw-again"] != ids["other"]
    names = dict(zip(table["snapshot"].map_elements(lambda p: p.split("/")[-2], return_dtype=str), table["name"],
                     strict=True))
    assert names == {"kw": f"{ids['kw']} (kw)", "kw-again": f"{ids['kw']} (kw-again)", "other": ids["other"]}
