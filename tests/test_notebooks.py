"""The notebooks run end to end in CI, on a small run this test makes."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from tests.support.guards import ProbabilityGuard
from tests.support.paths import REPO
from tests.support.runs import make_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from margin.guards.keyword import KeywordGuard

    root = tmp_path_factory.mktemp("nb")
    make_run(root / "keyword", KeywordGuard(), search="exhaustive")
    make_run(root / "prob", ProbabilityGuard())
    return root


def execute(name: str, runs, monkeypatch) -> nbformat.NotebookNode:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("MARGIN_SNAPSHOTS", str(runs / "*" / "snapshot.json"))
    monkeypatch.setenv("MARGIN_RUN", str(runs / "keyword"))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(REPO / "notebooks" / name, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        f"{name} is committed with outputs; clear them"
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    return notebook


def outputs(notebook, kind: str) -> list:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs
            if kind in o.get("data", {})]


def test_curves_notebook_compares_the_runs_guards(runs, monkeypatch):
    notebook = execute("curves.ipynb", runs, monkeypatch)
    text = "".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs)
    assert "2 snapshot(s)" in text and "intervals" in text
    assert len(outputs(notebook, "image/png")) >= 2  # curves and the FPR vs FNR scatter
    assert any("keyword" in o["data"]["text/html"] and "prob" in o["data"]["text/html"]
               for o in outputs(notebook, "text/html"))


def test_transforms_notebook_shows_costs_and_effectiveness(runs, monkeypatch):
    notebook = execute("transforms.ipynb", runs, monkeypatch)
    html = "".join(o["data"]["text/html"] for o in outputs(notebook, "text/html"))
    assert "homoglyph" in html and "&lt;U+200B&gt;" in html  # an invisible edit shown visibly
    assert len(outputs(notebook, "image/png")) >= 2  # cost box plot and effectiveness heatmap
