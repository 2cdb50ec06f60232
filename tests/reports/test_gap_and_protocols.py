from __future__ import annotations

import pytest

from margin.errors import InputError
from margin.reports.gap import GapRow, suite_gap
from margin.reports.protocols import (
    ADAPTIVE_PROTOCOL,
    STANDARD_PROTOCOL,
    protocol_for,
)
from margin.reports.snapshot import build_snapshot, snapshot_entry
from margin.reports.snapshot_schema import Evaluation, Provenance, validate_snapshot
from margin.types import GuardInfo, SearchResult


def result(pid, label, cost, status="scored"):
    return SearchResult(pid, label, "t", "safe", cost if status == "scored" else None, False, None, 3, status)


def test_suite_gap_joins_by_prompt_in_standard_order():
    standard = [result("a", "unsafe", 9.0), result("b", "safe", 100.0), result("c", "unsafe", 4.0),
                result("d", "unsafe", 2.0)]
    adaptive = [result("c", "unsafe", 4.0), result("a", "unsafe", 2.5), result("b", "safe", 0.0, "missing"),
                result("e", "safe", 1.0)]
    assert suite_gap(standard, adaptive) == [
        GapRow("a", "unsafe", "t", 9.0, 2.5, 6.5),
        GapRow("b", "safe", "t", 100.0, None, None),
        GapRow("c", "unsafe", "t", 4.0, 4.0, 0.0),
    ]


def test_suite_gap_refuses_runs_that_disagree_on_labels():
    with pytest.raises(ValueError, match="'a'"):
        suite_gap([result("a", "unsafe", 1.0)], [result("a", "safe", 1.0)])


def snapshot(search):
    guard = GuardInfo(id="g", family="k", checkpoint="", revision="", backend="python", caveats=("c",))
    entry = snapshot_entry(guard, [result("a", "unsafe", 9.0), result("b", "safe", 100.0)], 100.0, Evaluation(search=search))
    provenance = Provenance.model_validate({"dataset": {"name": "d", "sha256": "1"}, "suite": {"name": "s", "sha256": "2"},
                                            "budget": 100.0})
    return build_snapshot([entry], provenance, protocol=protocol_for(search))


def test_adaptive_snapshots_are_labelled_and_never_mixed_with_standard_ones():
    adaptive, plain = snapshot("adaptive"), snapshot("cheapest")
    assert adaptive.meta.protocol == ADAPTIVE_PROTOCOL != STANDARD_PROTOCOL == plain.meta.protocol
    assert adaptive.data[0].evaluation.upper_bound is True
    assert len(adaptive.data[0].evaluation.caveats) == 2 and "ADAPTIVE" in adaptive.meta.methodology
    assert "upper_bound" not in plain.data[0].evaluation.document() and "ADAPTIVE" not in plain.meta.methodology
    for built in (adaptive, plain):  # what is written is what the site reads
        assert validate_snapshot(built.document(), "built") == built
    mixed = plain.document()
    mixed["data"].append({**adaptive.document()["data"][0], "id": "h", "rank": 2})
    with pytest.raises(InputError, match="never ranked together") as info:
        validate_snapshot(mixed, "runs/b/snapshot.json")
    assert info.value.field == "data[1].evaluation.search"
