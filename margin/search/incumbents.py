"""Incumbents: a finished standard-suite run's flips, to seed adaptive search with.

Seeded, adaptive search asks for the suite's flip first and only ever improves on it, so
its cost never exceeds the suite's for any prompt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.runfolder import read_jsonl, result_from_record
from margin.types import Flip


def load_incumbents(run_dir: str | Path, expect: dict[str, Any]) -> dict[str, Flip]:
    """Flips by prompt id from `run_dir`'s results, refusing a run whose dataset, guard, cost
    norm or corpus length differ from `expect` (a run manifest: their units would differ)."""
    folder = Path(run_dir)
    manifest_path, results_path = folder / "run.json", folder / "results.jsonl"
    for path in (manifest_path, results_path):
        if not path.is_file():
            raise InputError("not a finished margin run (missing file)", path=path, field="--incumbents")
    try:
        manifest = json.loads(manifest_path.read_text("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", path=manifest_path) from None
    checks = {
        "dataset.sha256": (manifest.get("dataset", {}).get("sha256"), expect["dataset"]["sha256"]),
        "guard.id": (manifest.get("guard", {}).get("id"), expect["guard"]["id"]),
        "cost_norm": (manifest.get("cost_norm"), expect["cost_norm"]),
        "corpus_mean_length": (manifest.get("corpus_mean_length"), expect["corpus_mean_length"]),
    }
    for name, (theirs, ours) in checks.items():
        if theirs != ours:
            raise InputError(f"incumbent run differs in {name} ({theirs!r}, this run {ours!r})",
                             path=manifest_path, field="--incumbents")
    flips: dict[str, Flip] = {}
    try:
        for record in read_jsonl(results_path):
            result = result_from_record(record)
            if result.status == "scored" and result.flip is not None:
                flips[result.prompt_id] = result.flip
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"unreadable results ({exc})", path=results_path, field="--incumbents") from None
    return flips
