"""No behaviour change: runs today give the results, snapshots and receipts the code gave
at commit 4d592e0, before the call engine, the layout and the driver's speed work. The
SHA-256s were measured with that commit; a snapshot is compared without its date and the
margin version and commit that made it, receipts without their run id and latencies and in
sorted order (they record what happened, in the order it happened).

The snapshot pins were renewed when snapshots began to record coverage in full (each record's
`coverage` gained `total`, `invalid`, `complete` and `reason`; `meta` gained `min_coverage`,
`units.coverage` and a sentence of methodology): with those fields taken out, the new
snapshots hash to the pins of 4d592e0 exactly, and results and receipts are unchanged. They
were measured again when clean accuracies and robust-accuracy bands moved from the percentile
bootstrap to Wilson score intervals (results and receipts unchanged)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

import margin
from tests.support.shared_runs import keyword_xstest_run

pytestmark = pytest.mark.slow

REFERENCE = {  # (dataset, suite, search): (results.jsonl, snapshot.json, receipts.jsonl)
    ("sample", "standard", "cheapest"): (
        "8cf2b45384f270cfb396e5ec815aa94319f4c58f6854b7a640c2ba25e052ae9a",
        "3d3a13476389e12a6453fe8c96a12693704fd6e6c902e15264f6146d181b207c",
        "b3fd245bc31186c3adcd09f8d0d5257cf581a8465035003c241c29575501a3e0"),
    ("sample", "quick", "exhaustive"): (
        "483d3b995d705f9cbfc1d1a7049c978fd1a90a6acd1f651b0706214bc78ffe8b",
        "ebd09531684cd97587576ef8f1e70f6a02097dc9407849826dd3dc57d3ab6ed1",
        "a51c777be1f117f3b1bfc1f08e7d49bbe35c8b5c785012440b878d5e14a06666"),
    ("xstest", "standard", "cheapest"): (
        "6c002ec567cf1133b5e662a69aa823b5d609ad9ea829b22f465a35a56f3f85f9",
        "6f1264b1ec8d893eae1ae9fd766327a803a4b9eba0bcbab049c43131fca20a39",
        "42bd6f4c8676ac9df7801c3ee4e2bffcfcf9c53fb569f439553d64b4b33c2135"),
}


def digests(folder: Path) -> tuple[str, str, str]:
    snapshot = json.loads((folder / "snapshot.json").read_text("utf-8"))
    snapshot["meta"].pop("snapshot_date")
    for key in ("git_commit", "margin_version"):
        snapshot["meta"]["provenance"].pop(key, None)
    receipts = []
    for line in (folder / "receipts.jsonl").read_text("utf-8").splitlines():
        record = json.loads(line)
        record.pop("run_id", None)
        record.pop("latency_s", None)
        receipts.append(json.dumps(record, sort_keys=True))
    return (hashlib.sha256((folder / "results.jsonl").read_bytes()).hexdigest(),
            hashlib.sha256(json.dumps(snapshot, sort_keys=True).encode()).hexdigest(),
            hashlib.sha256("\n".join(sorted(receipts)).encode()).hexdigest())


@pytest.mark.parametrize(("dataset", "suite", "search"), list(REFERENCE))
def test_a_run_gives_the_reference_records(tmp_path, tmp_path_factory, request, dataset, suite, search):
    if dataset == "xstest":
        path = request.getfixturevalue("xstest_csv")
        if path.name != "xstest_prompts.csv":
            pytest.skip("the reference names the dataset by its file name, xstest_prompts.csv")
        # The same options, made once for the tests that also read this run (export, check).
        assert (suite, search) == ("standard", "cheapest")
        assert digests(keyword_xstest_run(tmp_path_factory, path)) == REFERENCE[(dataset, suite, search)]
        return
    margin.run("keyword", dataset=dataset, suite=suite, search=search, engine="local", cache=False, out=tmp_path / "r")
    assert digests(tmp_path / "r") == REFERENCE[(dataset, suite, search)]
