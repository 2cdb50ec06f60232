"""GGUF files as local checkpoints: a `--model FILE.gguf` that transformers loads dequantized.

transformers reads a GGUF file's weights, config and tokenizer (`from_pretrained(folder,
gguf_file=name)`) with the `gguf` and `accelerate` packages, and dequantizes the weights (a
Q4_1 file runs in float32). A file has no revision: its content pins it, so its SHA-256 is
part of the guard's identity, and a different file (same name, other weights) never reuses
the verdicts of the first.
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import lru_cache
from pathlib import Path

SUFFIX = ".gguf"
#: What transformers needs, besides itself and torch, to read a GGUF file.
PACKAGES = ("gguf", "accelerate")
INSTALL = "pip install 'margin[hf]' (or: pip install gguf accelerate)"


def is_gguf(model: object) -> bool:
    """Whether a checkpoint names a GGUF file (by its suffix, as llama.cpp names them)."""
    return isinstance(model, str) and model.lower().endswith(SUFFIX)


def missing_packages() -> list[str]:
    """The packages loading a GGUF file needs that are not installed (none are imported)."""
    return [name for name in PACKAGES if importlib.util.find_spec(name) is None]


def location(model: str) -> tuple[str, str]:
    """The folder and file name `from_pretrained(folder, gguf_file=name)` takes."""
    path = Path(model)
    return str(path.parent), path.name


def file_sha256(model: str) -> str:
    """The file's SHA-256, read once per process for each (path, size, modification time)."""
    stat = Path(model).stat()
    return _sha256(str(Path(model).resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=16)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
