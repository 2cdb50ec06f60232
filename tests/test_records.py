"""Receipt lines: written field by field, byte for byte what json.dumps of the record gives;
buffered, on disk after each flush."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from margin.runfolder import ReceiptWriter, call_line, call_record, dumps, read_jsonl
from margin.types import Candidate, GuardCall, Verdict

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
