"""Safe names, paths inside their folder, and writes that never follow a link or leave half a
file (issue 34, item 2)."""

from __future__ import annotations

import errno
import os

import pytest

from margin.errors import InputError
from margin.util import safefiles
from margin.util.safefiles import (
    atomic_file,
    atomic_write_text,
    check_date,
    check_id,
    inside,
    open_append,
    safe_name,
    slug,
)


@pytest.mark.parametrize("name", ["run", "minilm", "a.b", "kw~1a2b+nfkc", "2026-12-04"])
def test_safe_names_pass(name):
    assert safe_name(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", ".hidden", "a/b", "a\\b", "../x", "a\x00b", "x" * 201, 3, None])
def test_unsafe_names_are_refused(name):
    with pytest.raises(ValueError, match="cannot name a file"):
        safe_name(name)


def test_a_slug_keeps_only_safe_characters():
    assert slug("a/b\\c:d e..") == "a-b-c-d-e.."
    assert "/" not in slug("../../etc") and slug("../../etc") == "..-..-etc"


@pytest.mark.parametrize("value", ["2026-12-04/../../../../ESCAPED", "2026-13-01", "2026-2-1", "20261204",
                                   1764806400, None, "2026-12-04 "])
def test_dates_are_exactly_yyyy_mm_dd(value):
    with pytest.raises(ValueError):
        check_date(value)
    assert check_date("2026-12-04") == "2026-12-04"


@pytest.mark.parametrize("value", ["", ".", "..", "a/b", "..\\x", "a\x00", "x" * 201, 7])
def test_ids_with_a_separator_or_a_dot_name_are_refused(value):
    with pytest.raises(ValueError):
        check_id(value)
    assert check_id("python:guard.py:Guard@t0.5") == "python:guard.py:Guard@t0.5"


def test_inside_refuses_what_resolves_outside_the_folder(tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    assert inside(root, "api/v1/x.json") == root / "api/v1/x.json"
    (root / "out").symlink_to(tmp_path)
    for rel in ("../x", "a/../../x", str(tmp_path / "x"), "out/x", ".", ""):
        with pytest.raises(ValueError, match="outside"):
            inside(root, rel)


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = tmp_path / "run.json"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), atomic_file(path) as handle:
        handle.write("half of the new")
        raise RuntimeError("the writer failed")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_a_full_disk_leaves_no_empty_or_partial_file(tmp_path, monkeypatch):
    def full(_fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(safefiles.os, "fsync", full)
    with pytest.raises(OSError, match="No space"):
        atomic_write_text(tmp_path / "snapshot.json", "{}\n")
    assert list(tmp_path.iterdir()) == []


def test_an_atomic_write_replaces_a_link_and_leaves_its_target_alone(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "snapshot.json").symlink_to(outside)
    atomic_write_text(folder / "snapshot.json", "{}\n")
    assert outside.read_text() == "precious\n"
    assert not (folder / "snapshot.json").is_symlink() and (folder / "snapshot.json").read_text() == "{}\n"


def test_appending_through_a_link_is_refused(tmp_path):
    outside = tmp_path / "outside.jsonl"
    outside.write_text("precious\n")
    (tmp_path / "receipts.jsonl").symlink_to(outside)
    with pytest.raises(InputError, match="symbolic link") as error:
        open_append(tmp_path / "receipts.jsonl")
    assert str(tmp_path / "receipts.jsonl") in str(error.value)
    assert outside.read_text() == "precious\n"
    with open_append(tmp_path / "new.jsonl") as handle:
        handle.write("a\n")
    assert (tmp_path / "new.jsonl").read_text() == "a\n"
    assert oct((tmp_path / "new.jsonl").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
