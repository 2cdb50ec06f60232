"""README's table of what a newcomer touches stays true: the checkout's paths exist, and the
run folder, cache files and variables are the ones the code uses."""

from __future__ import annotations

import re

from margin.datasets import XSTEST_ENV, cache_dir
from margin.runs.executing.folder import default_out_dir
from margin.runs.executing.verdict_cache import default_cache_path as verdicts_path
from margin.studies.cache import default_cache_path as replies_path
from tests.support.paths import REPO


def newcomer_table() -> dict[str, str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("What a newcomer touches")
    rows = re.findall(r"^\| (.+?) \| (.+?) \|$", text[start:text.index("\n## ", start)], re.MULTILINE)
    return {path: what for path, what in rows[2:]}  # after the header and its rule


def test_the_checkouts_paths_in_the_table_exist():
    table = newcomer_table()
    repo_paths = [p for cell in table for p in re.findall(r"`([^`]+)`", cell)
                  if not p.startswith((".venv", "runs", "$", "~"))]
    assert repo_paths and all(list(REPO.glob(p)) for p in repo_paths), repo_paths


def test_the_run_folder_and_cache_are_where_the_table_says(monkeypatch, tmp_path):
    table = newcomer_table()
    assert str(default_out_dir("keyword")).startswith("runs/keyword-")
    assert "`runs/<guard>-<UTC time>/`" in table
    cache_row = next(what for path, what in table.items() if "MARGIN_CACHE_DIR" in path)
    for name in (verdicts_path().name, replies_path().name, "xstest/"):
        assert f"`{name}`" in cache_row
    monkeypatch.delenv("MARGIN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "margin"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "margin"
    assert XSTEST_ENV == "MARGIN_XSTEST"


def test_the_readme_says_how_to_get_margin_on_the_path_and_jupyter():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert "source .venv/bin/activate" in text and ".venv/bin/pip install jupyterlab" in text
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    assert "VENV ?= .venv" in makefile and "ipykernel" in (REPO / "pyproject.toml").read_text(encoding="utf-8")
