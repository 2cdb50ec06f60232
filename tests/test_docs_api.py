"""docs/api.md's examples run as they are written: every ```python block of the page, in
order, in one namespace, in a fresh folder (its `runs/`), with the example study's toy server
started and `studies/local.yaml` copied there pointing at it."""

from __future__ import annotations

import re

import pytest

from tests.support.paths import REPO
from tests.support.study import toy_server

PAGE = REPO / "docs" / "api.md"
EXAMPLE_URL = "http://127.0.0.1:8011/v1"  # where studies/local.yaml expects the toy server


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", markdown, flags=re.S | re.M)


def test_the_page_has_python_examples():
    blocks = python_blocks(PAGE.read_text("utf-8"))
    assert blocks and all(b.strip() for b in blocks)
    assert python_blocks("text\n```python\nx = 1\n```\nmore\n```python\ny = 2\n```\n") == ["x = 1\n", "y = 2\n"]


@pytest.mark.slow  # the example study: 48 prompts, 3 toy models, 7 transformations (7 s here)
def test_every_example_of_docs_api_runs(tmp_path, monkeypatch):
    config = (REPO / "studies" / "local.yaml").read_text("utf-8")
    assert EXAMPLE_URL in config
    (tmp_path / "studies").mkdir()
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs_api__"}
    with toy_server() as url:
        (tmp_path / "studies" / "local.yaml").write_text(config.replace(EXAMPLE_URL, url), "utf-8")
        for number, block in enumerate(python_blocks(PAGE.read_text("utf-8")), start=1):
            exec(compile(block, f"{PAGE}: python block {number}", "exec"), namespace)
    assert (tmp_path / "runs" / "kw" / "snapshot.json").is_file()
    assert namespace["result"].pairings["data"]  # the study's pairings, as the page shows them
