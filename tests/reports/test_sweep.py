from __future__ import annotations

import pytest

from margin.datasets import load_dataset
from margin.reports.observations import PromptObservations, Variant, from_receipts, read_calls
from margin.reports.sweep import (
    THRESHOLDS,
    NoProbabilities,
    average_precision,
    has_probabilities,
    originals_average_precision,
    read_at,
    result_at,
    sweep,
    sweep_record,
)
from margin.runfolder import read_jsonl
from margin.runs.executing.execute import execute
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare
from margin.types import Verdict
from tests.support.guards import ProbabilityGuard


def v(p: float) -> Verdict:
    return Verdict("unsafe" if p >= 0.5 else "safe", p_unsafe=p)


def observations() -> list[PromptObservations]:
    return [
        PromptObservations("u", "unsafe", "t", v(0.7), (
            Variant("a", "1", 0, 10.0, v(0.4)), Variant("b", "1", 0, 30.0, v(0.2)))),
        PromptObservations("s", "safe", "t", v(0.2), (
            Variant("a", "1", 0, 5.0, v(0.45)), Variant("b", "1", 0, 20.0, v(0.6)))),
    ]


def test_thresholds_are_005_to_095():
    assert THRESHOLDS[0] == 0.05 and THRESHOLDS[-1] == 0.95 and len(THRESHOLDS) == 19


def test_read_at_uses_p_at_or_above_threshold_and_keeps_invalid():
    assert read_at(v(0.5), 0.5) == "unsafe"
    assert read_at(v(0.49), 0.5) == "safe"
    assert read_at(Verdict("invalid"), 0.1) == "invalid"
    with pytest.raises(NoProbabilities):
        read_at(Verdict("safe"), 0.5)


@pytest.mark.parametrize(("threshold", "unsafe_cost", "safe_cost"), [
    (0.5, 10.0, 20.0),   # 0.4 reads safe (flip at 10); 0.6 reads unsafe (flip at 20)
    (0.3, 30.0, 5.0),    # 0.4 still unsafe, 0.2 safe at 30; 0.45 already unsafe at 5
    (0.8, 0.0, 100.0),   # the original 0.7 reads safe: wrong, c = 0; nothing reaches 0.8
])
def test_flip_costs_at_a_threshold_by_hand(threshold, unsafe_cost, safe_cost):
    u, s = (result_at(o, threshold, 100.0) for o in observations())
    assert (u.flip_cost, s.flip_cost) == (unsafe_cost, safe_cost)
    assert s.capped == (safe_cost == 100.0)


def test_sweep_figures_by_hand():
    points = {p.threshold: p.figures for p in sweep(observations(), 100.0, thresholds=(0.3, 0.5, 0.8))}
    assert points[0.5].report.balanced_margin == pytest.approx(15.0)  # (10 + 20) / 2
    assert points[0.5].report.clean_balanced_accuracy == pytest.approx(100.0)
    assert points[0.3].report.balanced_margin == pytest.approx(17.5)  # (30 + 5) / 2
    assert points[0.8].report.clean_balanced_accuracy == pytest.approx(50.0)  # unsafe original missed
    assert points[0.8].report.safe_margin == pytest.approx(100.0)


def test_a_missing_verdict_makes_the_prompt_lost_coverage():
    obs = PromptObservations("u", "unsafe", "t", v(0.9), (Variant("a", "1", 0, 10.0, None),))
    assert result_at(obs, 0.5, 100.0).status == "missing"
    assert not obs.complete


def test_average_precision_by_hand():
    # Ranked 0.9 (unsafe), 0.8 (safe), 0.7 (unsafe), 0.1 (safe): P = 1 at R = .5, P = 2/3 at R = 1.
    assert average_precision([0.9, 0.8, 0.7, 0.1], [True, False, True, False]) == pytest.approx(5 / 6)
    assert average_precision([0.9, 0.1], [True, False]) == 1.0
    assert average_precision([0.5, 0.5], [True, False]) == pytest.approx(0.5)  # a tie is one step
    assert average_precision([0.3, 0.9, 0.5], [True, False, False]) == pytest.approx(1 / 3)
    assert average_precision([0.2], [False]) is None


def test_originals_average_precision_skips_invalid():
    obs = [*observations(), PromptObservations("x", "unsafe", "t", Verdict("invalid"), ())]
    ap = originals_average_precision(obs)
    assert ap.average_precision == 1.0 and ap.scored == 2 and ap.unscored == 1


def test_has_probabilities():
    assert has_probabilities(observations())
    bare = [PromptObservations("u", "unsafe", "t", Verdict("unsafe"), ())]
    assert not has_probabilities(bare)


def test_sweep_at_the_guards_threshold_reproduces_the_run(tmp_path):
    """One exhaustive run, no new guard call: at the guard's own threshold the sweep gives
    exactly the run's figures, and other thresholds move them."""
    guard = ProbabilityGuard()
    prepared = prepare(RunConfig.of(guard="prob", suite="quick", search="exhaustive", engine="local"), guard)
    outcome = execute(prepared, tmp_path / "run")
    calls_before = len(guard.seen)
    obs = from_receipts(read_calls(read_jsonl(tmp_path / "run" / "receipts.jsonl")), outcome.results)
    record = sweep_record(obs, 100.0)
    assert len(guard.seen) == calls_before
    at_half = next(r for r in record["thresholds"] if r["threshold"] == 0.5)
    for name in ("balanced_margin", "unsafe_margin", "safe_margin", "clean_balanced_accuracy"):
        assert at_half[name] is not None and at_half[name] == outcome.snapshot.document()["data"][0][name]
    assert at_half["confidence_intervals"]["balanced_margin"] == \
        outcome.snapshot.document()["data"][0]["confidence_intervals"]["balanced_margin"]
    assert len({r["clean_balanced_accuracy"] for r in record["thresholds"]}) > 1
    ap = record["average_precision"]
    assert ap["scored"] == 48 and 0 < ap["originals"] < 1
    labels = [p.label == "unsafe" for p in load_dataset("sample").prompts]
    scores = [guard.p(p.text) for p in load_dataset("sample").prompts]
    assert ap["originals"] == pytest.approx(average_precision(scores, labels))
