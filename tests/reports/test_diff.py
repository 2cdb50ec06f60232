"""`margin diff` and `margin check` as pure functions: sides built from results by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from margin.errors import InputError
from margin.reports.bootstrap import BootstrapSpec, paired_differences
from margin.reports.check import explain, judge
from margin.reports.diff import (
    DiffDocument,
    DiffSide,
    FigureChange,
    FlipCosts,
    SideFigure,
    diff_document,
    family_rows,
    prompt_changes,
    unpaired,
)
from margin.reports.sides import Side, require_comparable, snapshot_side
from margin.reports.snapshot import record, snapshot_entry
from margin.types import Flip, GuardInfo, SearchResult

FAMILIES = {"homoglyph": "homoglyph", "zero-width-space": "zero-width"}


def res(pid: str, label: str, cost: float, transform: str | None = None, *, type_: str = "t") -> SearchResult:
    flip = None if transform is None else Flip(transform, "1", 0, cost, "safe", f"{pid}~")
    wrong = cost == 0
    return SearchResult(prompt_id=pid, label=label, type=type_,  # type: ignore[arg-type]
                        clean_verdict=("safe" if label == "unsafe" else "unsafe") if wrong else label,
                        flip_cost=cost, capped=transform is None and not wrong, flip=flip, guard_calls=1)


def side(name: str, results: list[SearchResult], **terms: object) -> Side:
    info = GuardInfo(id=name, family="k", checkpoint="", revision="", backend="python")
    base = {"protocol": "margin-flip-cost/1", "dataset": "d", "suite": "s", "budget": 100.0,
            "cost_norm": "corpus", "prompts": len(results)}
    return Side(name, record(snapshot_entry(info, results, 100.0), 1), {**base, **terms}, results)


A = [res("u1", "unsafe", 100.0), res("u2", "unsafe", 2.0, "homoglyph"), res("u3", "unsafe", 0.0),
     res("s1", "safe", 100.0), res("s2", "safe", 10.0, "zero-width-space"), res("s3", "safe", 100.0)]
B = [res("u1", "unsafe", 5.0, "zero-width-space"), res("u2", "unsafe", 100.0), res("u3", "unsafe", 0.0),
     res("s1", "safe", 100.0), res("s2", "safe", 10.0, "zero-width-space"), res("s3", "safe", 0.0)]


def test_unpaired_interval_is_mover_by_hand():
    # a = 10 [8, 13], b = 14 [11, 16]: d = 4, low = 4 - hypot(14 - 11, 13 - 10) = 4 - 4.2426,
    # high = 4 + hypot(16 - 14, 10 - 8) = 4 + 2.8284
    low, high = unpaired(10.0, [8.0, 13.0], 14.0, [11.0, 16.0])
    assert (low, high) == pytest.approx((-0.242641, 6.828427), abs=1e-6)


def test_prompt_changes_by_hand():
    changes = prompt_changes(A, B, FAMILIES)
    # u1: robust -> flipped (newly broken); s3: robust -> wrong (newly broken); u2: flipped -> robust.
    assert [r.prompt_id for r in changes.newly_broken] == ["s3", "u1"]
    assert [r.prompt_id for r in changes.newly_robust] == ["u2"]
    assert changes.flip_costs == FlipCosts(cheaper=2, dearer=1, same=3)
    u1 = changes.newly_broken[1]
    assert u1.a.state == "robust" and u1.b.family == "zero-width"
    assert u1.b.flip is not None and u1.b.flip.transform == "zero-width-space" and u1.b.flip_cost == 5.0


def test_family_shares_by_hand():
    rows = {r.family: r for r in family_rows(A, B, FAMILIES, BootstrapSpec())["unsafe"]}
    # unsafe: A homoglyph 1 (u2), none 1 (u1), original 1 (u3); B zero-width 1, none 1, original 1
    assert (rows["homoglyph"].a, rows["homoglyph"].b) == (1, 0)
    assert rows["homoglyph"].difference == pytest.approx(-1 / 3)
    assert (rows["original"].a, rows["original"].b) == (1, 1)
    assert rows["original"].interval == [0.0, 0.0]  # the same prompt on both sides: no change in any replicate
    low, high = rows["zero-width"].interval
    assert 0.0 <= low <= 1 / 3 <= high <= 1.0


def test_diff_of_two_runs_is_paired():
    document = diff_document(side("a", A), side("b", B), FAMILIES)
    expected = paired_differences(A, B, 100.0)
    for name, diff in expected.items():
        row = document.figures[name]
        assert diff is not None and row.difference == pytest.approx(diff.value)
        assert row.interval == diff.interval.as_list() and row.moves == diff.moves
    assert document.method.startswith("paired")
    assert document.slices["type"]["t"]["safe_margin"].difference == pytest.approx(expected["safe_margin"].value)


def test_diff_with_a_snapshot_side_is_unpaired_and_has_no_prompts():
    b = side("b", B)
    snap = replace(b, results=None)
    document = diff_document(side("a", A), snap, FAMILIES)
    assert document.method.startswith("unpaired") and document.prompts is None and document.families is None
    row = document.figures["balanced_margin"]
    assert row.a.value is not None and row.a.interval and row.b.value is not None and row.b.interval
    assert row.interval == pytest.approx(unpaired(row.a.value, row.a.interval, row.b.value, row.b.interval))


@pytest.mark.parametrize(("term", "value"), [("protocol", "margin-adaptive-flip-cost/1"), ("dataset", "x"),
                                             ("suite", "quick"), ("budget", 50.0), ("cost_norm", "prompt"),
                                             ("prompts", 5)])
def test_sides_that_measured_different_things_are_refused(term, value):
    with pytest.raises(InputError, match=f"different {term.replace('_', ' ')}"):
        require_comparable(side("a", A), side("b", B, **{term: value}))


def test_runs_on_different_prompts_are_refused():
    other = [*B[:-1], res("s9", "safe", 100.0)]
    with pytest.raises(InputError, match="different prompts"):
        require_comparable(side("a", A), side("b", other))


def row(difference: float, low: float, high: float) -> FigureChange:
    return FigureChange(SideFigure(50.0, None), SideFigure(50.0 + difference, None), difference, [low, high],
                        low > 0 or high < 0)


def document(balanced: FigureChange, unsafe: FigureChange) -> DiffDocument:
    figures = {"balanced_margin": balanced, "unsafe_margin": unsafe, "safe_margin": row(0, -1, 1)}
    return DiffDocument(DiffSide("base", "run", "g"), DiffSide("run", "run", "g"), {}, "b minus a", "paired", {},
                        figures, {})


def test_check_fails_only_on_a_gated_significant_drop_beyond_the_tolerance():
    drop = document(row(-3, -5, -1), row(0, -1, 1))
    assert not judge(drop).passed
    assert judge(drop, max_drop=1.0).passed  # [-5, -1] does not lie wholly below -1
    assert not judge(drop, max_drop=0.5).passed
    assert judge(document(row(-3, -6, 0.5), row(0, -1, 1))).passed  # the interval holds 0


def test_class_margins_are_gated_only_per_class():
    unsafe_drop = document(row(1, 0.5, 2), row(-2, -3, -1))
    assert judge(unsafe_drop).passed
    verdict = judge(unsafe_drop, per_class=True)
    assert not verdict.passed and [f.figure for f in verdict.failures] == ["unsafe_margin"]


def test_check_floor_and_explanation():
    steady = document(row(0, -1, 1), row(0, -1, 1))
    verdict = judge(steady, min_balanced=60.0)
    assert not verdict.passed and verdict.failures[0].figure == "balanced_margin floor"
    lines = explain(steady, verdict)
    assert lines[-1] == "FAILED: balanced_margin floor"
    assert any("50.00 < floor 60" in line for line in lines)
    assert explain(steady, judge(steady, min_balanced=40.0))[-1].startswith("PASSED")


def test_a_published_snapshot_gives_the_record_of_the_other_sides_guard(tmp_path):
    records = [{**side(name, A).record.document(), "rank": rank} for rank, name in enumerate(("a", "b"), start=1)]
    meta = {"snapshot_date": "2026-12-05", "methodology": "docs/design.md",
            "protocol": "margin-flip-cost/1", "provenance": {"dataset": {"name": "d", "sha256": "1"},
                                                            "suite": {"name": "s", "sha256": "2"},
                                                            "budget": 100, "cost_norm": "corpus", "prompts": 6}}
    path = tmp_path / "published.json"
    path.write_text(json.dumps({"meta": meta, "data": records}), encoding="utf-8")
    chosen = snapshot_side(path, "b")
    assert chosen.guard_id == "b" and chosen.kind == "snapshot" and chosen.terms["prompts"] == 6
    with pytest.raises(InputError, match=r"holds 2 guards \(a, b\)"):
        snapshot_side(path, "c")
    path.write_text("[1, 2]", encoding="utf-8")
    with pytest.raises(InputError, match="not a margin snapshot"):
        snapshot_side(path)
