"""A finished run folder made in-process, for tests that read, rescore or merge runs."""

from __future__ import annotations

from pathlib import Path

from margin.runs.executing.execute import execute
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare


def make_run(out: Path, guard, *, search="cheapest", suite="quick", limit=None, attempts=3,
             dataset="sample") -> Path:
    prepared = prepare(RunConfig.of(guard="g", dataset=dataset, suite=suite, search=search, limit=limit,
                                 max_attempts=attempts, retry_wait_s=0.0, engine="local"), guard)
    execute(prepared, out)
    return out
