"""Run folders that several test files only read, made once per test session: with
pytest-xdist, once across its workers (the first to ask makes it under a file lock, the
others wait and read it)."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This session's temporary folder, the same for every xdist worker (each worker's own
    base folder sits in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_folder(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], object]) -> Path:
    """`make(folder)` once per session for `name`; returns the folder. A failed make leaves
    nothing behind, so the next test to ask makes it again (and fails the same way)."""
    root = session_root(tmp_path_factory) / "shared-runs" / name
    root.mkdir(parents=True, exist_ok=True)
    folder, done = root / "r", root / "done"
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            make(folder)
            done.touch()
    return folder


def keyword_xstest_run(tmp_path_factory: pytest.TempPathFactory, xstest_csv: Path) -> Path:
    """`keyword` on XSTest, standard suite, cheapest search, local engine, no cache: the
    reference run's options (tests/runs/test_reference_runs.py pins what it writes)."""
    import margin

    def make(folder: Path) -> None:
        margin.run("keyword", dataset=str(xstest_csv), suite="standard", search="cheapest", engine="local",
                   cache=False, out=folder)

    return shared_folder(tmp_path_factory, "keyword-xstest-standard-cheapest", make)


def keyword_quick_cli_run(tmp_path_factory: pytest.TempPathFactory, ray_address: str) -> Path:
    """`margin run --guard keyword --suite quick` (the bundled sample, Ray, the cache on), a
    margin process on the session's Ray."""
    from tests.support.cli import margin

    def make(folder: Path) -> None:
        proc = margin("run", "--guard", "keyword", "--suite", "quick", "--out", str(folder),
                      env={"RAY_ADDRESS": ray_address})
        assert proc.returncode == 0, proc.stderr

    return shared_folder(tmp_path_factory, "keyword-quick-cli", make)
