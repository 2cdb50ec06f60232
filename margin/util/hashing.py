"""Content hashes and canonical JSON, so identities and files hash the same everywhere."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    # surrogatepass keeps a lone surrogate distinct from any valid text instead of raising.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, ASCII escapes: one byte string per value."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
