"""Issue 36, item 6: each export format is one module in `margin/reports/exports/formats/`, and
`EXPORTERS` lists that folder; the CLI, the library and the docs read the table, and the CLI and
the library export the same bytes. A new format is its module, its test and its docs row."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import margin
import margin.reports.exports as exports
from margin.errors import InputError
from margin.reports.exports import EXPORTERS, exporter
from tests.support.cli import margin as cli
from tests.support.cli import margin_env


def test_every_module_in_formats_is_a_format_by_its_name_and_renders():
    from margin.reports.exports import formats

    modules = sorted(m.name for m in pkgutil.iter_modules(formats.__path__))
    assert list(EXPORTERS) == modules == ["garak", "inspect", "jbb", "junit", "sarif"]
    for fmt in EXPORTERS:
        module = exporter(fmt)
        assert module.__name__.rsplit(".", 1)[1] == fmt
        assert callable(module.render) and callable(module.holds), fmt
    assert tuple(EXPORTERS) == margin.EXPORT_FORMATS


def test_a_module_added_to_formats_is_a_format(tmp_path):
    """The table is read from the folder: a module there is listed by its name, none is forgotten."""
    import importlib

    folder = tmp_path / "margin" / "reports" / "exports"
    (folder / "formats").mkdir(parents=True)
    for module in EXPORTERS:
        (folder / "formats" / f"{module}.py").write_text("", "utf-8")
    (folder / "formats" / "csv.py").write_text("def render(bundle): return ''\ndef holds(text): return ''\n", "utf-8")
    (folder / "__init__.py").write_text(Path(exports.__file__).read_text("utf-8"), "utf-8")
    spec = importlib.util.spec_from_file_location("margin.reports.exports", folder / "__init__.py")
    assert spec is not None and spec.loader is not None
    copy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy)
    assert list(copy.EXPORTERS) == ["csv", *EXPORTERS]


def test_the_cli_offers_the_tables_formats():
    done = cli("export", "--help", env={"COLUMNS": "200"})
    assert done.returncode == 0
    assert ", ".join(EXPORTERS) in " ".join(done.stdout.split())


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("exporters") / "kw"
    margin.run("keyword", suite="quick", limit=10, engine="local", cache=False, out=out)
    return out


@pytest.mark.parametrize("fmt", ["garak", "jbb", "sarif", "junit"])
def test_the_library_writes_the_bytes_the_cli_writes(run_dir, tmp_path, fmt):
    by_library = margin.export(run_dir, fmt, out=tmp_path / f"lib.{fmt}")
    done = cli("export", str(run_dir), "--format", fmt, "--out", str(tmp_path / f"cli.{fmt}"))
    assert done.returncode == 0, done.stderr
    assert by_library == tmp_path / f"lib.{fmt}"
    assert by_library.read_bytes() == (tmp_path / f"cli.{fmt}").read_bytes()


def test_the_library_names_an_inspect_log_as_inspect_does(run_dir, tmp_path):
    path = margin.export(run_dir, "inspect", out=tmp_path / "logs")
    assert path.parent == tmp_path / "logs" and exporter("inspect").listed(path.name)


def test_an_unknown_format_is_refused_through_the_library_as_on_the_command_line(run_dir, tmp_path):
    with pytest.raises(InputError, match="did you mean sarif") as caught:
        margin.export(run_dir, "sarf", out=tmp_path / "x")
    assert caught.value.field == "--format" and not (tmp_path / "x").exists()


def test_the_cli_stays_light_no_exporter_is_imported_to_start_it():
    code = ("import sys, margin.cli.app; print(sorted(m for m in sys.modules "
            "if m.startswith('margin.reports.exports.')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=margin_env(), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_docs_describe_each_format_in_one_row():
    from tests.support.paths import REPO

    rows = [line.split("|")[1].strip() for line in (REPO / "docs" / "reports.md").read_text("utf-8").splitlines()
            if line.startswith("| `")]
    assert [row for row in rows if row.strip("`") in EXPORTERS] == [f"`{fmt}`" for fmt in EXPORTERS]
