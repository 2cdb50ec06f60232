"""docs/transforms.md is the generator's output, and the suite sizes it reports are in range."""

from __future__ import annotations

import statistics

import pytest

from tests.support.paths import REPO
from tests.support.scripts import load_script


@pytest.fixture(scope="module")
def generator():
    return load_script(REPO / "docs" / "gen_transforms.py")


@pytest.mark.slow
def test_committed_page_matches_the_generator(generator, xstest_csv):
    committed = (REPO / "docs" / "transforms.md").read_text("utf-8")
    assert committed == generator.render(xstest_csv), "run: python docs/gen_transforms.py"


@pytest.mark.slow
def test_suite_sizes_on_xstest(generator, xstest_csv):
    standard = generator.suite_sizes(xstest_csv, "standard")  # cached: the page test measured it
    assert len(standard) == 450
    assert 200 <= statistics.mean(standard) <= 600 and min(standard) >= 200 and max(standard) <= 600
    assert max(generator.suite_sizes(xstest_csv, "quick")) < 60


def test_page_lists_every_transform():
    from margin.transforms.registry import registry

    page = (REPO / "docs" / "transforms.md").read_text("utf-8")
    for name in registry():
        assert f"| `{name}` |" in page


def test_the_readme_points_at_the_page_for_the_librarys_counts():
    """Counts go stale with each new transform: the README leaves them to the generated page."""
    import re

    readme = (REPO / "README.md").read_text("utf-8")
    section = readme[readme.index("## Transforms and suites"):readme.index("## Guards")]
    assert "docs/transforms.md" in section
    stale = re.findall(r"\b\d[\d.,]* (?:costed|deterministic|transforms|edits|wrappers|families|candidates)\b", section)
    assert not stale, f"README.md repeats counts docs/transforms.md gives: {stale}"
