"""Issue 34, item 9: a `python:` guard runs code, so `margin run` and `margin study` say which
file a command line or config will import before anything is imported."""

from __future__ import annotations

import pytest

from tests.support.cli import margin
from tests.support.study import study_config, write_config

# Importing this file fails: the line must come before the import, so before this error.
GUARD = 'raise RuntimeError("the guard file was imported")\n\nclass Guard:\n    def classify(self, texts):\n        return ["safe"] * len(texts)\n'


def imported_line(tmp_path) -> str:
    return f"runs code: guard python:{(tmp_path / 'g.py').resolve()}:Guard imports class Guard from {(tmp_path / 'g.py').resolve()}"


@pytest.mark.timeout(120)
def test_run_names_the_file_it_imports_before_importing_it(tmp_path):
    (tmp_path / "g.py").write_text(GUARD, "utf-8")
    proc = margin("run", "--guard", f"python:{tmp_path / 'g.py'}:Guard", "--suite", "quick", "--limit", "1",
                  "--engine", "local", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == imported_line(tmp_path), proc.stderr
    assert "the guard file was imported" in proc.stderr.split(lines[0], 1)[1]


@pytest.mark.timeout(120)
def test_study_names_the_file_its_config_imports_before_running(tmp_path):
    (tmp_path / "g.py").write_text(GUARD, "utf-8")
    config = write_config(tmp_path, study_config("http://127.0.0.1:9/v1", guard={"guard": "python:g.py:Guard"}))
    proc = margin("study", str(config), "--engine", "local", "--out", str(tmp_path / "out"))
    assert proc.stderr.splitlines()[0] == imported_line(tmp_path), proc.stderr


def test_a_guard_that_imports_nothing_prints_no_such_line(tmp_path):
    proc = margin("run", "--guard", "keyword", "--suite", "quick", "--limit", "1", "--engine", "local",
                  "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "runs code:" not in proc.stderr + proc.stdout


@pytest.mark.timeout(120)
def test_ablate_names_the_file_it_imports_before_importing_it(tmp_path):
    (tmp_path / "g.py").write_text(GUARD, "utf-8")
    proc = margin("ablate", "--guard", f"python:{tmp_path / 'g.py'}:Guard", "--suite", "quick", "--limit", "1",
                  "--defences", "nfkc", "--engine", "local", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[0] == imported_line(tmp_path), proc.stderr


def test_a_missing_guard_file_is_one_error_and_no_such_line(tmp_path):
    proc = margin("run", "--guard", f"python:{tmp_path / 'none.py'}:Guard", "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "runs code:" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
