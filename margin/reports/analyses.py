"""The per-candidate analyses of a run: invariance, per-transform effectiveness and, for
guards that give p_unsafe, the threshold sweep; held as their models, written as JSON records.

All three read every candidate's verdict, so they exist only for exhaustive runs (or
recorded verdicts that cover every candidate); otherwise there are none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from margin.reports.effectiveness import Effectiveness
from margin.reports.invariance import Invariance
from margin.reports.observations import PromptObservations
from margin.reports.sweep import Sweep, has_probabilities
from margin.runfolder import dumps


@dataclass(frozen=True)
class Analyses:
    """What a run's candidates say beyond its margins; None where the run cannot say it."""

    invariance: Invariance | None = None
    effectiveness: Effectiveness | None = None
    sweep: Sweep | None = None

    def records(self) -> dict[str, Any]:
        """The JSON records by name, those there are (`margin report --json` prints them)."""
        found = {"invariance": self.invariance, "effectiveness": self.effectiveness, "sweep": self.sweep}
        return {name: analysis.record() for name, analysis in found.items() if analysis is not None}

    def files(self) -> dict[str, str]:
        """transforms.json (invariance and effectiveness) and sweep.json, where there are any."""
        records = self.records()
        files = {}
        if "invariance" in records:
            files["transforms.json"] = dumps({"invariance": records["invariance"],
                                              "effectiveness": records["effectiveness"]}) + "\n"
        if "sweep" in records:
            files["sweep.json"] = dumps(records["sweep"]) + "\n"
        return files


def analyse(observations: Sequence[PromptObservations], budget: float, *, exhaustive: bool,
            families: Mapping[str, str] | None = None) -> Analyses:
    if not exhaustive or not observations:
        return Analyses()
    return Analyses(Invariance.of(observations, families), Effectiveness.of(observations, families),
                    Sweep.of(observations, budget) if has_probabilities(observations) else None)
