"""Issue 36, item 6: each export format is listed once, in `EXPORTERS`, beside the modules that
render them; the CLI and the library read that table, and export the same bytes."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import margin
import margin.reports.exports as exports
from margin.errors import InputError
from margin.reports.exports import EXPORTERS, exporter
from tests.support.cli import margin as cli
from tests.support.cli import margin_env

# The package's modules that are not a format: what every format reads, and the writer.
NOT_FORMATS = {"bundle", "write"}


def test_every_format_module_is_in_the_table_and_every_entry_renders():
    modules = {m.name for m in pkgutil.iter_modules(exports.__path__)} - NOT_FORMATS
    assert modules == {path.rsplit(".", 1)[1] for path in EXPORTERS.values()}
    for fmt in EXPORTERS:
        module = exporter(fmt)
        assert callable(module.render) and callable(module.holds), fmt
    assert tuple(EXPORTERS) == margin.EXPORT_FORMATS


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


def test_the_readme_names_the_tables_formats():
    from tests.support.paths import REPO

    assert f"--format {'|'.join(EXPORTERS)} --out FILE" in (REPO / "README.md").read_text("utf-8")
