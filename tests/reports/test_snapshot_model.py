"""One snapshot model: snapshots are built through it and read back with it, the headline
figures named once, and a snapshot built through it is the JSON it always was."""

from __future__ import annotations

import json

import pytest

from margin.errors import InputError
from margin.reports.snapshot import build_snapshot, snapshot_entry
from margin.reports.snapshot_schema import (
    Evaluation,
    FigureSet,
    Headline,
    Provenance,
    Record,
    validate_snapshot,
)
from margin.types import HEADLINE_FIGURES, GuardInfo, SearchResult

RESULTS = [SearchResult("u1", "unsafe", "t", "unsafe", 12.5, False, None, 3),
           SearchResult("u2", "unsafe", "t", "safe", 0.0, False, None, 1),
           SearchResult("s1", "safe", "t", "safe", 100.0, True, None, 5)]


def built(budget: float = 100.0, **guard: object) -> dict:
    info = GuardInfo(id="g", family="k", checkpoint="c", revision="r", backend="python", **guard)  # type: ignore[arg-type]
    entry = snapshot_entry(info, RESULTS, budget, Evaluation(search="cheapest", seed=0))
    provenance = Provenance.model_validate({"dataset": {"name": "d", "sha256": "1"}, "suite": {"name": "s", "sha256": "2"},
                                            "budget": budget, "cost_norm": "corpus", "prompts": len(RESULTS)})
    return build_snapshot([entry], provenance).document()


def test_the_headline_figures_are_the_models_and_come_after_id_and_rank():
    assert tuple(Headline.model_fields)[:len(HEADLINE_FIGURES)] == HEADLINE_FIGURES
    assert tuple(FigureSet.model_fields)[:len(HEADLINE_FIGURES)] == HEADLINE_FIGURES
    assert tuple(Record.model_fields)[:2 + len(HEADLINE_FIGURES)] == ("id", "rank", *HEADLINE_FIGURES)


def test_a_built_snapshot_reads_back_through_the_same_model_unchanged():
    snapshot = built()
    again = validate_snapshot(json.loads(json.dumps(snapshot)), "built").document()
    assert json.dumps(again) == json.dumps(snapshot)  # same keys, same order, same numbers
    record = snapshot["data"][0]
    assert list(record)[:6] == ["id", "rank", *HEADLINE_FIGURES]
    assert "bands" in record["curves"] and all("bands" not in f["curves"]
                                               for values in record["slices"].values() for f in values.values())
    assert "scope" not in record["evaluation"]  # a field nobody set is not written
    assert built(scope="prompt-injection detector")["data"][0]["evaluation"]["scope"] == "prompt-injection detector"


def test_numbers_keep_their_type():
    assert '"budget": 100,' in json.dumps(built(budget=100)["meta"]["provenance"])
    assert '"budget": 100.0,' in json.dumps(built(budget=100.0)["meta"]["provenance"])


def test_a_snapshot_read_back_is_checked_by_the_model():
    snapshot = built()
    snapshot["meta"]["provenance"]["budget"] = 0
    with pytest.raises(InputError) as info:
        validate_snapshot(snapshot, "edited.json")
    assert info.value.field == "meta.provenance.budget" and "greater than 0" in str(info.value)
    snapshot = built()
    snapshot["data"][0]["confidence_intervals"]["balanced_margin"] = [1.0]
    with pytest.raises(InputError, match=r"data\.0\.confidence_intervals\.balanced_margin"):
        validate_snapshot(snapshot, "edited.json")
