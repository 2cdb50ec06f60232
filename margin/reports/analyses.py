"""The per-candidate analyses of a run, as JSON-ready records: invariance, per-transform
effectiveness and, for guards that give p_unsafe, the threshold sweep.

All three read every candidate's verdict, so they exist only for exhaustive runs (or
recorded verdicts that cover every candidate); otherwise the result is empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from margin.reports.effectiveness import effectiveness_record
from margin.reports.invariance import invariance_record
from margin.reports.observations import PromptObservations
from margin.reports.sweep import has_probabilities, sweep_record
from margin.runfolder import dumps


def analyse(observations: Sequence[PromptObservations], budget: float, *, exhaustive: bool,
            families: Mapping[str, str] | None = None) -> dict[str, Any]:
    if not exhaustive or not observations:
        return {}
    out: dict[str, Any] = {
        "invariance": invariance_record(observations, families),
        "effectiveness": effectiveness_record(observations, families),
    }
    if has_probabilities(observations):
        out["sweep"] = sweep_record(observations, budget)
    return out


def analysis_files(analyses: Mapping[str, Any]) -> dict[str, str]:
    """transforms.json (invariance and effectiveness) and sweep.json, where there are any."""
    files = {}
    if "invariance" in analyses:
        files["transforms.json"] = dumps({"invariance": analyses["invariance"],
                                          "effectiveness": analyses["effectiveness"]}) + "\n"
    if "sweep" in analyses:
        files["sweep.json"] = dumps(analyses["sweep"]) + "\n"
    return files
