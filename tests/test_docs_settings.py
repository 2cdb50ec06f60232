"""The settings tables in docs/engine.md and README.md are docs/gen_settings.py's output."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import REPO
from tests.support.scripts import load_script


@pytest.fixture(scope="module")
def generator():
    return load_script(REPO / "docs" / "gen_settings.py")


@pytest.mark.parametrize("kind", ["full", "limits"])
def test_committed_tables_match_the_generator(generator, kind):
    page = generator.PAGES[kind].read_text("utf-8")
    assert f"<!-- settings:{kind}" in page
    assert generator.render(page) == page, "run: python docs/gen_settings.py"


def test_every_setting_is_a_row_with_its_flag_and_default(generator):
    from margin.engine.settings import SETTINGS

    page = generator.PAGES["full"].read_text("utf-8")
    for setting in SETTINGS:
        row = next(line for line in page.splitlines() if line.startswith(f"| `{setting.name}` |"))
        assert (setting.flag or "—") in row and setting.default_text() in row


def test_a_stale_table_is_rewritten_and_the_check_fails(generator, tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- settings:limits x -->\n| old |\n<!-- /settings -->\nend\n", "utf-8")
    fresh = generator.render(page.read_text("utf-8"))
    assert fresh.startswith("intro\n<!-- settings:limits x -->\n| `backend_options` |") and fresh.endswith(
        "<!-- /settings -->\nend\n") and "| old |" not in fresh
    monkeypatch.setattr(generator, "PAGES", {"limits": page})
    monkeypatch.setattr(sys, "argv", ["gen_settings.py", "--check"])
    assert generator.main() == 1 and "| old |" in page.read_text("utf-8")  # --check writes nothing
    monkeypatch.setattr(sys, "argv", ["gen_settings.py"])
    assert generator.main() == 0 and page.read_text("utf-8") == fresh


def test_the_script_runs_from_the_checkout():
    proc = subprocess.run([sys.executable, "docs/gen_settings.py", "--check"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
