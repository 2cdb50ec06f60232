"""Reading a finished run folder: `run.json`, `results.jsonl` and `receipts.jsonl`.

Each problem is one InputError naming the file (and line), so `score`, `report`,
`publish` and `integral` refuse a broken folder the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.records import info_from_record, read_jsonl, result_from_record
from margin.types import GuardInfo, SearchResult


@dataclass(frozen=True)
class RunDir:
    path: Path
    manifest: dict[str, Any]
    results: list[SearchResult]

    @property
    def receipts_path(self) -> Path:
        return self.path / "receipts.jsonl"

    def receipts(self) -> Iterator[dict[str, Any]]:
        return read_records(self.receipts_path)

    @property
    def guard(self) -> GuardInfo:
        return guard_info(self.manifest, self.path / "run.json")

    @property
    def budget(self) -> float:
        return float(self.manifest["budget"])

    @property
    def search(self) -> str:
        return str(self.manifest.get("search", ""))


def read_manifest(path: Path) -> dict[str, Any]:
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError("not a run folder (no run.json)", path=path.parent) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read ({exc})", path=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON ({exc.msg})", path=path, line=exc.lineno) from None
    if not isinstance(manifest, dict):
        raise InputError("expected a JSON object", path=path)
    for key in ("dataset", "suite", "guard", "budget", "cost_norm"):
        if key not in manifest:
            raise InputError("missing field", path=path, field=key)
    return manifest


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise InputError("no such file", path=path)
    try:
        yield from read_jsonl(path)
    except ValueError as exc:  # a corrupt line that is not the torn last one
        raise InputError(str(exc), path=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 ({exc.reason})", path=path) from None


def read_results(path: Path) -> list[SearchResult]:
    results = []
    for number, record in enumerate(read_records(path), start=1):
        try:
            results.append(result_from_record(record))
        except (KeyError, TypeError) as exc:
            raise InputError(f"not a result record ({exc})", path=path, line=number) from None
    return results


def load_run(path: Path) -> RunDir:
    """A run folder with its manifest and results (receipts are read on demand)."""
    if not path.is_dir():
        raise InputError("no such run folder", path=path)
    return RunDir(path, read_manifest(path / "run.json"), read_results(path / "results.jsonl"))


def guard_info(manifest: dict[str, Any], where: Path | str = "run.json") -> GuardInfo:
    """The guard identity a run recorded (template and caveats where the run kept them)."""
    g = manifest.get("guard")
    if not isinstance(g, dict) or "id" not in g:
        raise InputError("missing guard identity", path=where, field="guard.id")
    return info_from_record(g)
