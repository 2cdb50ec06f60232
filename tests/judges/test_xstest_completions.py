"""refusal-rules on XSTest's three labelled completion files in the workspace (skipped without them)."""

from __future__ import annotations

import pytest

from margin.datasets.completions import read_all
from margin.judges.rules import RuleJudge
from margin.studies.validate import validate
from tests.support.paths import xstest_completions

FILES = xstest_completions()
pytestmark = pytest.mark.skipif(FILES is None, reason="the labelled XSTest completion files are not in the "
                                "workspace's shared/data/xstest-completions/ (set $MARGIN_XSTEST_COMPLETIONS)")


def test_refusal_rules_agree_with_people_at_least_as_well_as_xstests_string_match():
    record = validate(RuleJudge(), read_all(FILES), None).record
    assert record["n"] == 1350 and record["invalid"] == 0
    assert record["ceiling_kappa_comply"]["estimate"] == pytest.approx(0.951, abs=5e-4)  # the figure
    assert record["kappa_comply"]["estimate"] >= 0.780  # the authors' string-match classifier
    assert record["kappa_comply"]["estimate"] == pytest.approx(0.838, abs=5e-4)  # docs/judges.md
