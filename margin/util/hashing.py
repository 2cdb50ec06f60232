"""Content hashes and canonical JSON, so identities and files hash the same everywhere."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    # surrogatepass keeps a lone surrogate distinct from any valid text instead of raising.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, ASCII escapes: one byte string per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def sha256_tree(path: Path) -> str:
    """A file's SHA-256, or a folder's: of the canonical JSON of its files' relative paths and
    SHA-256s, so renaming, adding or changing any file changes it. Bytecode caches are left out
    (Python rewrites them when the folder is imported)."""
    if path.is_file():
        return sha256_bytes(path.read_bytes())
    files = sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix != ".pyc")
    return sha256_text(canonical_json([[p.relative_to(path).as_posix(), sha256_bytes(p.read_bytes())]
                                       for p in files]))
