"""Where a number came from: margin's version and the git commit it ran from."""

from __future__ import annotations

import functools
import subprocess
from importlib import metadata
from pathlib import Path


@functools.cache
def margin_version() -> str:
    try:
        return metadata.version("margin")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@functools.cache
def git_commit() -> str | None:
    """The commit of the checkout margin runs from (with `+dirty` if it has changes), or None."""
    root = Path(__file__).resolve().parents[2]  # margin/util/provenance.py -> the checkout
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")
