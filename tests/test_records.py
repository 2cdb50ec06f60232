"""Receipt lines: written field by field, byte for byte what json.dumps of the record gives;
buffered, on disk after each flush."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.errors import InputError
from margin.runfolder import (
    ReceiptWriter,
    call_line,
    call_record,
    dumps,
    folder_results,
    read_jsonl,
    read_results,
    write_results,
)
from margin.types import Candidate, Flip, GuardCall, SearchResult, Verdict

texts = st.text()  # any code point, lone surrogates and quotes included
floats = st.floats(allow_nan=True, allow_infinity=True)
candidates = st.builds(Candidate, texts, st.none() | texts, st.none() | texts, st.integers(-(2**70), 2**70), texts,
                       st.floats(min_value=0, max_value=1e6))
verdicts = st.none() | st.builds(Verdict, st.sampled_from(["safe", "unsafe", "invalid"]), st.none() | floats, texts)
calls = st.builds(GuardCall, candidates, verdicts, st.integers(0, 9), st.floats(min_value=0, max_value=1e4),
                  st.none() | texts, st.booleans(), st.booleans())


@settings(max_examples=300, deadline=None)
@given(calls, texts, texts)
def test_a_call_line_is_the_json_of_its_record(call, run_id, guard_id):
    head = f'{{"kind": "call", "run_id": {json.dumps(run_id, ensure_ascii=False)}, ' \
           f'"guard_id": {json.dumps(guard_id, ensure_ascii=False)}, '
    assert call_line(head, call) == dumps(call_record(run_id, guard_id, call)) + "\n"


@settings(max_examples=100, deadline=None)
@given(calls, st.sampled_from([None, "response"]))
def test_a_response_runs_lines_name_their_target_and_a_prompt_runs_do_not(tmp_path_factory, call, target):
    path = tmp_path_factory.mktemp("r") / "receipts.jsonl"
    writer = ReceiptWriter(path, "run", "guard", target=target)
    writer.call(call)
    writer.close()
    assert path.read_text("utf-8") == dumps(call_record("run", "guard", call, target)) + "\n"
    assert ("target" in json.loads(path.read_text("utf-8"))) == (target is not None)


def test_lines_reach_the_file_at_each_flush(tmp_path):
    path = tmp_path / "receipts.jsonl"
    writer = ReceiptWriter(path, "run", "guard")
    call = GuardCall(Candidate("p", None, None, 0, "hello", 0.0), Verdict("safe", 0.1, "safe"), 1, 0.25)
    writer.call(call)
    assert path.read_bytes() == b""  # buffered: a batch's lines go out together
    writer.flush()
    assert list(read_jsonl(path)) == [call_record("run", "guard", call)]
    writer.call(call)
    writer.close()  # the rest, and an fsync
    assert len(list(read_jsonl(path))) == 2


def test_one_reader_reads_results_from_results_jsonl_or_a_killed_runs_receipts(tmp_path):
    first = SearchResult("p1", "unsafe", "t", "safe", 4.5, False, Flip("homoglyph", "1", 0, 4.5, "safe", "x"), 3)
    second = SearchResult("p2", "safe", "t", "safe", 100.0, True, None, 9)
    assert folder_results(tmp_path) == []  # neither file: no results yet
    writer = ReceiptWriter(tmp_path / "receipts.jsonl", "run", "guard")
    call = GuardCall(Candidate("p1", None, None, 0, "hello", 0.0), Verdict("safe", 0.1, "safe"), 1, 0.25)
    writer.call(call)
    writer.result(first)
    writer.call(call)
    writer.close()
    assert folder_results(tmp_path) == read_results(tmp_path / "receipts.jsonl") == [first]  # call lines skipped
    write_results(tmp_path / "results.jsonl", [first, second])
    assert folder_results(tmp_path) == [first, second]  # the finished file wins


def test_the_reader_names_the_line_of_a_bad_result(tmp_path):
    path = tmp_path / "results.jsonl"
    write_results(path, [SearchResult("p1", "safe", "t", "safe", 1.0, False, None, 1)])
    path.write_text(path.read_text("utf-8") + '{"kind": "result", "prompt_id": "p2"}\n', "utf-8")
    with pytest.raises(InputError, match=r"results.jsonl:2: not a result record"):
        read_results(path)
    path.write_text(path.read_text("utf-8").replace('"flip_cost": 1.0', '"flip_cost": NaN'), "utf-8")
    with pytest.raises(InputError, match=r"results.jsonl:1 \[flip_cost\]: expected a finite number"):
        folder_results(tmp_path)
