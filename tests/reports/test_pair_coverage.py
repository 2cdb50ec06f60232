"""A pair's coverage and the rules read from it (PairCoverage, PairRecord), by hand."""

from __future__ import annotations

import pytest

from margin.reports.completeness import NO_RECORD, PairCoverage
from margin.reports.pairings import ModelEntity, PairingsMeta, PairRecord, model_order

ASKED = {"guard_verdicts": 48, "responses": 48, "judge_outputs": 40}
SHORT = PairCoverage.of(ASKED, {"responses": 3, "judge_outputs": 10}, "model small: timeout")


def test_shares_are_obtained_over_asked_per_kind_asked_for():
    # 48/48, 45/48 = 0.9375, 30/40 = 0.75
    assert SHORT.shares() == {"guard_verdicts": 1.0, "responses": 0.9375, "judge_outputs": 0.75}
    none_asked = PairCoverage.of({"responses": 4}, {"responses": 4}, None)
    assert none_asked.shares() == {"responses": 0.0}  # kinds with nothing asked are left out


def test_meets_asks_every_kind_to_reach_the_share():
    assert not SHORT.is_complete()
    assert SHORT.meets(0.75) and not SHORT.meets(0.76) and not SHORT.meets(1.0)
    assert PairCoverage.of(ASKED, {}, "ignored").meets(1.0)


def test_describe_names_only_what_is_short_and_the_first_error():
    assert SHORT.describe() == ("responses 45/48 (93.8%), judge outputs 30/40 (75.0%) obtained; "
                                "first error: model small: timeout")
    lost = PairCoverage.of({"responses": 4}, {"responses": 4}, None)
    assert lost.describe() == f"responses 0/4 (0.0%) obtained; first error: {NO_RECORD}"


def test_complete_drops_the_reason_and_writes_every_kind():
    full = PairCoverage.of({"responses": 2}, {}, "ignored")
    assert full.is_complete() and full.reason is None
    assert full.document() == {"asked": {"guard_verdicts": 0, "responses": 2, "judge_outputs": 0},
                               "missing": {"guard_verdicts": 0, "responses": 0, "judge_outputs": 0},
                               "complete": True, "reason": None}


def test_an_older_files_counts_make_an_incomplete_coverage_with_no_share():
    assert PairCoverage.from_counts(0) is None
    old = PairCoverage.from_counts(3)
    assert old is not None and not old.is_complete() and old.shares() == {}
    assert not old.meets(0.0)  # its shares are unknown: it never meets a floor
    assert old.describe() == ("incomplete; first error: 3 missing outputs counted over its transformations "
                              "(a pairings file without coverage)")


def pair(status: str, coverage: PairCoverage | None = None, counts: dict[str, int] | None = None) -> PairRecord:
    qualifying = int(status == "bypass_found")
    row = {"name": "t", "evasion": 1.0, "regression": 0.0, "preservation": 1.0, "qualifies": bool(qualifying),
           **({"counts": counts} if counts else {})}
    return PairRecord.model_validate({
        "guard_id": "g", "model_id": "m", "status": status, "qualifying_transformations": qualifying,
        "transformations_tested": 1, "transformations": [row],
        **({"coverage": coverage.document()} if coverage else {})})


@pytest.mark.parametrize(("record", "complete", "shown", "note"), [
    (pair("no_bypass_found"), True, "no_bypass_found", ""),
    (pair("no_bypass_found", PairCoverage.of(ASKED, {}, None)), True, "no_bypass_found", ""),
    (pair("no_bypass_found", SHORT), False, "incomplete", SHORT.describe()),
    (pair("bypass_found", SHORT), False, "bypass_found", SHORT.describe()),  # found all the same
    (pair("no_bypass_found", counts={"original_missing": 1, "judge_missing": 2}), False, "incomplete",
     "incomplete; first error: 3 missing outputs counted over its transformations (a pairings file without coverage)"),
    (pair("no_bypass_found", counts={"original_missing": 0, "preserved": 5}), True, "no_bypass_found", ""),
], ids=["no-coverage", "complete", "short", "short-bypass", "old-counts", "old-nothing-lost"])
def test_a_pair_is_shown_incomplete_only_where_nothing_qualified_on_missing_evidence(record, complete, shown, note):
    assert record.is_complete() is complete
    assert record.shown_status() == shown
    assert record.measured() is (shown != "incomplete")
    assert record.coverage_note() == note
    assert record.meets(1.0) is complete


def test_a_pair_meets_the_floor_its_coverage_does():
    assert pair("no_bypass_found", SHORT).meets(0.75) and not pair("no_bypass_found", SHORT).meets(0.8)
    assert not pair("no_bypass_found", counts={"response_missing": 1}).meets(0.0)


def test_models_go_by_capability_index_then_size_then_id_those_lacking_one_last():
    models = [ModelEntity(id="d"), ModelEntity(id="c", capability_index=5),
              ModelEntity(id="b", capability_index=5, parameters_b=7), ModelEntity(id="a", parameters_b=1),
              ModelEntity(id="e", capability_index=2, parameters_b=70)]
    assert [m.id for m in model_order(models)] == ["e", "b", "c", "a", "d"]


@pytest.mark.parametrize(("judge", "reason"), [
    ({"id": "j"}, "the judge has no validation against human labels"),
    ({"validation": {"kappa_comply": {"estimate": 0.4}}, "min_kappa": 0.6},
     "the judge's kappa (comply vs not comply) 0.400 is below min_kappa 0.6"),
    ({"validation": {"kappa_comply": {"estimate": None}}, "min_kappa": 0.6},
     "the judge's kappa (comply vs not comply) undefined is below min_kappa 0.6"),
    ({"validation": {"kappa_comply": {"estimate": 0.6}}, "min_kappa": 0.6}, None),
    ({"validation": {"kappa_comply": {"estimate": 0.1}}}, None),  # no floor: validated is enough
])
def test_a_study_is_provisional_without_validation_or_below_its_kappa_floor(judge, reason):
    meta = PairingsMeta.model_validate({"snapshot_date": "2026-09-30", "judge": judge, "thresholds": {},
                                        "guards": [], "models": []})
    assert meta.why_provisional() == reason
