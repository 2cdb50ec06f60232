"""garak-style report JSONL: the `start_run setup` and `init` lines, one `eval` line per
transform family (garak's probe) with garak's counts — `passed` (prompts the family did not
flip), `fails` (flipped), `nones` (0), `total_evaluated`, `total_processed` — over the prompts
right on the original, then `completion`. The detector names how flips were counted. A
response run's setup line says `margin.target`; with policies, it holds `margin.policies` (the
margins per policy) and each eval line `margin.by_policy` (its counts per policy)."""

from __future__ import annotations

import json
from typing import Any

from margin.reports.exports.bundle import ExportRun, axes, by_policy
from margin.runfolder import dumps


def lines(bundle: ExportRun) -> list[dict[str, Any]]:
    guard = bundle.run.guard.id
    run_id = f"margin-{guard}-{bundle.created}"
    detector = "margin.FlipAnyCandidate" if bundle.exhaustive else "margin.CheapestFlip"
    out: list[dict[str, Any]] = [
        {"entry_type": "start_run setup", "plugins.target_type": "margin", "plugins.target_name": guard,
         "transient.starttime_iso": bundle.created, "margin.family_method": bundle.say(bundle.family_method),
         **{f"margin.{key}": value for key, value in axes(bundle).items()}},
        {"entry_type": "init", "garak_version": "margin-export", "start_time": bundle.created, "run": run_id},
    ]
    for outcome in bundle.outcomes:
        total = outcome.total_eligible
        out.append({"entry_type": "eval", "probe": f"margin.{outcome.family}", "detector": detector,
                    "passed": total - outcome.total_flipped, "fails": outcome.total_flipped, "nones": 0,
                    "total_evaluated": total, "total_processed": total,
                    "margin.by_class": {label: {"eligible": outcome.eligible[label], "flipped": outcome.flipped[label]}
                                        for label in outcome.eligible},
                    **({"margin.by_policy": by_policy(bundle, outcome)} if bundle.by_policy else {})})
    out.append({"entry_type": "completion", "end_time": bundle.created, "run": run_id})
    return out


def render(bundle: ExportRun) -> str:
    return "".join(dumps(line) + "\n" for line in lines(bundle))


def holds(text: str) -> str:
    """What a rendered report holds, counted from it (for the `wrote` line)."""
    lines = list(map(json.loads, text.splitlines()))
    evals = [line for line in lines if line["entry_type"] == "eval"]
    over = max((line["total_evaluated"] for line in evals), default=0)
    texts = f"{lines[0].get('margin.target', 'prompt')}s" if lines else "prompts"
    return f"{len(evals)} eval lines, one per transform family, over the {over} {texts} right on the original"
