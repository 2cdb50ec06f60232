"""Run files get an ordinary file's mode (0666 less the umask), so other users of a machine
can read a run folder as they can read any other file there."""

from __future__ import annotations

import os
import stat

import pytest

import margin
from margin.util.safefiles import atomic_write_text


@pytest.fixture
def umask():
    def set_umask(mask: int) -> None:
        os.umask(mask)

    before = os.umask(0o022)
    os.umask(before)
    yield set_umask
    os.umask(before)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o027, 0o640), (0o002, 0o664)])
def test_an_atomic_write_respects_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    atomic_write_text(tmp_path / "a.json", "{}\n")
    atomic_write_text(tmp_path / "a.json", "{}\n")  # replacing a file: the new one's mode
    assert mode(tmp_path / "a.json") == expected
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temp file left behind


def test_every_file_of_a_run_folder_is_0644_under_the_usual_umask(tmp_path, umask):
    umask(0o022)
    margin.run("keyword", dataset="sample", suite="quick", engine="local", cache=False, out=tmp_path / "kw")
    files = sorted(p for p in (tmp_path / "kw").rglob("*") if p.is_file())
    assert {p.name for p in files} >= {"run.json", "receipts.jsonl", "results.jsonl", "snapshot.json", "curves.png"}
    assert {p.name: oct(mode(p)) for p in files} == {p.name: oct(0o644) for p in files}
