"""README's table of what a newcomer touches stays true: the checkout's paths exist, and the
run folder, cache files and variables are the ones the code uses."""

from __future__ import annotations

import re

from margin.datasets import XSTEST_ENV, cache_dir
from margin.runs.recording.folder import default_out_dir
from margin.serving.verdict_cache import default_cache_path as verdicts_path
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


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_the_contents_link_every_section_and_every_anchor_link_has_its_heading():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)  # no headings in code blocks
    headings = re.findall(r"^#{2,3} (.+)$", prose, re.MULTILINE)
    anchors = {slug(h) for h in headings}
    contents = text[text.index("## Contents"):text.index("\n## ", text.index("## Contents") + 1)]
    linked = set(re.findall(r"\]\(#([^)]+)\)", contents))
    sections = {slug(h) for h in re.findall(r"^## (.+)$", prose, re.MULTILINE)} - {"contents"}
    assert sections <= linked, sections - linked
    assert set(re.findall(r"\]\(#([^)]+)\)", text)) <= anchors


def test_no_paragraph_runs_into_a_table():
    """A table row is a whole line between pipes: text after the last pipe (a missing blank
    line before the next paragraph) would be drawn inside the table's last cell."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    lines = prose.splitlines()
    for before, line in zip(lines, lines[1:], strict=False):
        if before.startswith("|"):
            assert before.rstrip().endswith("|"), before
            assert not line.strip() or line.startswith(("|", "<!--")), f"{before}\n{line}"
