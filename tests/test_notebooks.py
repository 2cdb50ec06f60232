"""The notebooks run end to end in CI, on small runs this test makes (two of them of one guard,
as `make demo` run twice gives), and on their own demo runs in a real kernel, which runs
its cells inside an asyncio loop."""

from __future__ import annotations

import shutil

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

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
    make_run(root / "keyword-again", KeywordGuard())  # a second run of one guard
    return root


def execute(name: str, runs, monkeypatch, folder=REPO / "notebooks") -> nbformat.NotebookNode:
    """Run the notebook in `folder` (its working directory); `runs` None: MARGIN_SNAPSHOTS and
    MARGIN_RUN unset, so it makes its own demo run."""
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    if runs is not None:
        monkeypatch.setenv("MARGIN_SNAPSHOTS", str(runs / "*" / "snapshot.json"))
        monkeypatch.setenv("MARGIN_RUN", str(runs / "keyword"))
    else:
        monkeypatch.delenv("MARGIN_SNAPSHOTS", raising=False)
        monkeypatch.delenv("MARGIN_RUN", raising=False)
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    notebook = nbformat.read(folder / name, as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code"), \
        f"{name} is committed with outputs; clear them"
    NotebookClient(notebook, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(folder)}}).execute()
    return notebook


def outputs(notebook, kind: str) -> list:
    return [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs
            if kind in o.get("data", {})]


def test_curves_notebook_compares_the_runs_guards(runs, monkeypatch):
    notebook = execute("curves.ipynb", runs, monkeypatch)
    text = "".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs)
    assert "3 snapshot(s)" in text and "intervals" in text
    assert len(outputs(notebook, "image/png")) >= 2  # curves and the FPR vs FNR scatter
    tables = [o["data"]["text/html"] for o in outputs(notebook, "text/html")]
    assert any("prob" in html and "keyword (keyword)" in html and "keyword (keyword-again)" in html
               for html in tables)  # two runs of one guard, told apart by their folders
    assert sum("keyword (keyword-again)" in html for html in tables) >= 2  # the margins and the slices


def test_curves_notebook_refuses_a_glob_that_matches_nothing(runs, tmp_path, monkeypatch):
    monkeypatch.setenv("MARGIN_SNAPSHOTS", str(tmp_path / "nothing-*" / "snapshot.json"))
    notebook = nbformat.read(REPO / "notebooks" / "curves.ipynb", as_version=4)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    with pytest.raises(CellExecutionError, match="matches no snapshot file"):
        NotebookClient(notebook, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert not list(tmp_path.iterdir())  # no demo run made instead


@pytest.mark.parametrize("name", ["curves.ipynb", "transforms.ipynb"])
def test_the_notebooks_make_their_demo_run_in_a_kernel_with_the_cache_on(name, tmp_path, monkeypatch):
    """No runs beside the notebook: it runs margin.run itself, inside the kernel's asyncio loop,
    with the verdict cache on (the engine's thread uses the caller's cache)."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    shutil.copy(REPO / "notebooks" / name, folder / name)
    notebook = execute(name, None, monkeypatch, folder=folder)
    assert len(outputs(notebook, "image/png")) >= 2


def test_transforms_notebook_shows_costs_and_effectiveness(runs, monkeypatch):
    notebook = execute("transforms.ipynb", runs, monkeypatch)
    html = "".join(o["data"]["text/html"] for o in outputs(notebook, "text/html"))
    assert "homoglyph" in html and "&lt;U+200B&gt;" in html  # an invisible edit shown visibly
    assert len(outputs(notebook, "image/png")) >= 2  # cost box plot and effectiveness heatmap
