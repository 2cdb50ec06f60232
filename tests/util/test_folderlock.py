"""One writer per folder (issue 34, item 1): a second holder is refused naming the first, a
lock left by a dead process is taken over, and a hold leaves nothing behind."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest

from margin.errors import InputError
from margin.util.folderlock import LOCK_NAME, FolderBusy, entries, hold
from tests.support.cli import margin_env


def test_a_hold_makes_the_folder_names_its_holder_and_leaves_nothing(tmp_path):
    folder = tmp_path / "run"
    with hold(folder) as held:
        assert held.made and held.took_over is None
        line = (folder / LOCK_NAME).read_text()
        assert line.startswith(f"pid {os.getpid()} on {socket.gethostname()} since ")
        assert entries(folder) == []
    assert list(folder.iterdir()) == []
    with hold(folder) as again:
        assert not again.made


def test_a_start_that_fails_before_writing_leaves_no_folder_it_made(tmp_path):
    made, given = tmp_path / "made", tmp_path / "given"
    given.mkdir()
    for folder in (made, given):
        with pytest.raises(InputError), hold(folder):
            raise InputError("refused after the lock was taken", field="--call-timeout")
    assert not made.exists() and given.is_dir() and list(given.iterdir()) == []
    with pytest.raises(InputError), hold(made):  # what it wrote before failing stays, for the caller to judge
        (made / "run.json").write_text("{}")
        raise InputError("failed after writing", field="--out")
    assert [p.name for p in made.iterdir()] == ["run.json"]


def test_a_second_process_is_refused_naming_the_holder(tmp_path):
    folder = tmp_path / "run"
    code = ("import sys; from pathlib import Path; from margin.util.folderlock import hold, FolderBusy\n"
            "try:\n    hold(Path(sys.argv[1]), what='run folder').__enter__()\n"
            "except FolderBusy as exc:\n    print(exc); sys.exit(2)\n")
    with hold(folder):
        proc = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True,
                              env=margin_env(), timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert f"pid {os.getpid()} on {socket.gethostname()}" in proc.stdout
        assert "another margin process writes this run folder" in proc.stdout
        assert (folder / LOCK_NAME).read_text().startswith(f"pid {os.getpid()} ")  # the holder's name kept
    proc = subprocess.run([sys.executable, "-c", code, str(folder)], capture_output=True, text=True,
                          env=margin_env(), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # released: the next one gets it


def test_another_thread_is_refused_and_the_same_thread_nests(tmp_path):
    folder = tmp_path / "run"
    refused: list[BaseException] = []

    def other() -> None:
        try:
            with hold(folder):
                pass
        except FolderBusy as exc:
            refused.append(exc)

    with hold(folder) as outer:
        with hold(folder) as inner:
            assert inner is outer
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(60)
        assert len(refused) == 1 and isinstance(refused[0], InputError)
        assert (folder / LOCK_NAME).exists()  # the nested hold did not release it
    assert not (folder / LOCK_NAME).exists()


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          timeout=60)
    stale = f"pid {dead.stdout.strip()} on {socket.gethostname()} since 2026-12-04T00:00:00Z"
    (folder / LOCK_NAME).write_text(stale + "\n")  # what a process killed with -9 leaves
    with hold(folder) as held:
        assert held.took_over == stale and not held.made
        assert (folder / LOCK_NAME).read_text().startswith(f"pid {os.getpid()} ")
    assert not (folder / LOCK_NAME).exists()


def test_a_linked_lock_file_is_refused_and_its_target_untouched(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_NAME).symlink_to(outside)
    with pytest.raises(InputError, match="symbolic link"), hold(folder):
        pass
    assert outside.read_text() == "precious\n"
