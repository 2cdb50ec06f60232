"""How margin names and writes its files: names from a safe character set, paths checked to
lie inside their folder, writes that never follow a symbolic link and never leave half a file.

Snapshots, pairings and configs are files people exchange, so a date, an id or a label that
becomes part of a path is checked first (`safe_name`, `check_date`) and the path it makes is
resolved and checked against its folder (`inside`). A file is replaced whole (`atomic_file`:
a new temp file, renamed over the target, so a link at the target is replaced, not followed)
or appended to through `open_append`, which refuses a link (O_NOFOLLOW).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from margin.errors import InputError

#: A name that may become a file or folder name: no separator, no leading dot (so neither
#: `.` nor `..`, nor a hidden file), nothing a shell or a URL would read differently.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~+-]*")
SAFE_CHARS = "._~+-"
#: A snapshot date as margin writes it (`meta.snapshot_date`), part of every snapshot's name.
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: Longest name a path part gets (most file systems allow 255 bytes).
MAX_NAME = 200


def safe_name(value: Any) -> str:
    """`value` if it may name a file or folder; ValueError saying what is allowed otherwise."""
    if not isinstance(value, str) or not SAFE_NAME.fullmatch(value) or len(value) > MAX_NAME:
        raise ValueError(f"{value!r} cannot name a file: use letters, digits and {' '.join(SAFE_CHARS)}, "
                         f"starting with a letter or digit, at most {MAX_NAME} characters")
    return value


def slug(text: str) -> str:
    """`text` made into a part of a name: every character but a letter, a digit or one of
    SAFE_CHARS becomes `-`. Callers join it to a prefix or a suffix (`00-`, a time stamp),
    so it never makes a name of its own: `..` becomes a harmless `00-..`."""
    return "".join(ch if ch.isalnum() or ch in SAFE_CHARS else "-" for ch in text)[:MAX_NAME]


def check_id(value: Any) -> str:
    """`value` if it may be an id (a guard's or a model's in a snapshot): a non-empty
    string of at most MAX_NAME characters with no path separator, NUL or dot name (`.`, `..`),
    so that even made into a path part it names one file; ValueError otherwise."""
    if not isinstance(value, str) or not value or len(value) > MAX_NAME:
        raise ValueError(f"expected an id of 1 to {MAX_NAME} characters, got {value!r}")
    if value in (".", "..") or any(ch in value for ch in "/\\\0"):
        raise ValueError(f"{value!r} is no id: no '/', '\\', NUL, '.' or '..'")
    return value


def check_date(value: Any) -> str:
    """`value` if it is a YYYY-MM-DD date; ValueError otherwise."""
    if not isinstance(value, str) or not DATE.fullmatch(value):
        raise ValueError(f"expected a date YYYY-MM-DD, got {value!r}")
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is no calendar date") from None
    return value


def inside(folder: Path, relative: str | Path) -> Path:
    """`folder / relative`, refused (ValueError) unless it resolves to a path inside `folder`
    (no `..`, no absolute part, no link that leads out)."""
    path = folder / relative
    root = folder.resolve()
    if Path(relative).is_absolute() or not path.resolve().is_relative_to(root) or path.resolve() == root:
        raise ValueError(f"{str(relative)!r} lies outside {folder}")
    return path


def refuse_link(path: Path) -> None:
    """An InputError if `path` is a symbolic link: margin writes its own files, never through one."""
    if path.is_symlink():
        raise InputError("is a symbolic link; margin reads and writes its own files, never through a link "
                         "(replace it with the file itself)", path=path)


def open_nofollow(path: Path, flags: int, mode: int = 0o666) -> int:
    """os.open with O_NOFOLLOW: a link at `path` is refused (InputError naming it)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_link(path)
        raise


def open_append(path: Path, *, buffering: int = -1) -> IO[str]:
    """A text file opened to append (created if new; 0666 less the umask), never through a link."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    return os.fdopen(fd, "a", encoding="utf-8", newline="\n", buffering=buffering)


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "w") -> Iterator[IO[Any]]:
    """A temp file in `path`'s folder, fsynced and renamed over `path` when the block ends
    (removed if it fails): readers see the old file or the whole new one, never a partial or
    empty one, and a link at `path` is replaced by the file, its target left alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    text = {} if "b" in mode else {"encoding": "utf-8", "newline": "\n"}
    try:
        with os.fdopen(fd, mode, **text) as handle:  # type: ignore[call-overload]
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _create_temp(path: Path) -> tuple[int, str]:
    """A new file beside `path` with the mode an ordinary file gets (0666 less the umask:
    0644 as a rule); mkstemp's 0600 would hide run folders from the other users of a machine."""
    while True:
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}")
        try:
            return open_nofollow(Path(tmp), os.O_WRONLY | os.O_CREAT | os.O_EXCL), tmp
        except FileExistsError:
            continue


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_file(path) as handle:
        handle.write(text)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_file(path, "wb") as handle:
        handle.write(data)
