"""One writer per folder: an advisory lock a run, study or ablation holds on its output folder
for as long as it writes it.

The lock is `flock` on `.margin.lock` inside the folder, and the file names its holder (pid,
host, since when) for the one-line refusal a second writer gets. The kernel drops a flock
when its process dies, however it dies, so a lock file left by a killed process is stale by
construction: the next writer takes the lock and writes its own name over it. The holder
removes the file when it is done, while still holding the lock; a writer that locked a file
which was removed meanwhile tries again with the new one, so two can never both hold it.

Nested holds in one thread (an ablation holding its folder while a step of it asks again)
are one hold; another thread or process is refused. flock is local to a machine: on a
network file system two machines are not kept apart.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.util.safefiles import open_nofollow

LOCK_NAME = ".margin.lock"

_held: dict[tuple[str, int], list[Any]] = {}  # (folder, thread) -> [nesting depth, the outer Hold]
_guard = threading.Lock()


class FolderBusy(InputError):
    """Another process (or thread) writes this folder now."""


@dataclass(frozen=True)
class Hold:
    folder: Path
    made: bool  # this hold created the folder (so a failed start may remove it again)
    took_over: str | None  # the holder named in a stale lock file taken over, if any


def entries(folder: Path) -> list[Path]:
    """What a folder holds, its lock file left out."""
    return [entry for entry in folder.iterdir() if entry.name != LOCK_NAME]


def holder_line() -> str:
    since = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"pid {os.getpid()} on {socket.gethostname()} since {since}\n"


@contextmanager
def hold(folder: Path, *, what: str = "folder") -> Iterator[Hold]:
    """Hold `folder`'s lock (creating the folder) for the block; FolderBusy (exit 2, one
    line naming the holder) if another process or thread holds it. A hold inside a hold of
    the same folder in one thread is the outer one (its `made` included)."""
    key = (str(folder.absolute()), threading.get_ident())
    with _guard:
        outer = _held.get(key)
        if outer is not None:
            outer[0] += 1
    if outer is not None:
        try:
            yield outer[1]
        finally:
            with _guard:
                outer[0] -= 1
        return
    made = _make(folder)
    fd, stale = _acquire(folder, what)
    held = Hold(folder, made, stale)
    with _guard:
        _held[key] = [1, held]
    try:
        yield held
    except BaseException:
        # A start refused or failed before it wrote anything leaves no folder it made.
        _release(folder, fd, remove=made and _empty(folder))
        raise
    else:
        _release(folder, fd)
    finally:
        with _guard:
            del _held[key]


def _make(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        if not folder.is_dir():
            raise InputError("exists and is not a folder", path=folder) from None
        return False
    return True


def _acquire(folder: Path, what: str) -> tuple[int, str | None]:
    path = folder / LOCK_NAME
    while True:
        fd = open_nofollow(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd) or "another process"
            os.close(fd)
            raise FolderBusy(f"another margin process writes this {what} ({holder}); wait for it to end, "
                             "or choose another folder", path=folder) from None
        except BaseException:
            os.close(fd)
            raise
        # The file we locked may have been removed by a holder that was just done: lock the new one.
        try:
            same = os.path.samestat(os.stat(path, follow_symlinks=False), os.fstat(fd))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    stale = _read(fd) or None  # a holder named in a file whose lock nobody held: a dead process
    os.ftruncate(fd, 0)
    os.pwrite(fd, holder_line().encode("utf-8"), 0)
    return fd, stale


def _read(fd: int) -> str:
    return os.pread(fd, 512, 0).decode("utf-8", "replace").strip()


def _empty(folder: Path) -> bool:
    try:
        return not entries(folder)
    except OSError:
        return False  # gone already


def _release(folder: Path, fd: int, *, remove: bool = False) -> None:
    try:
        (folder / LOCK_NAME).unlink(missing_ok=True)  # still locked: nobody can have taken the file over
        if remove:
            folder.rmdir()  # fails, and so keeps it, if anyone wrote into it meanwhile
    except OSError:
        pass  # the folder went away (a failed start removed it)
    finally:
        os.close(fd)
