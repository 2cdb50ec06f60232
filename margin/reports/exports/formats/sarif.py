"""SARIF 2.1.0 for code-scanning dashboards: one rule per transform family, one result per
family that flips the guard on at least one prompt, its level set by the flip rate over the
prompts right on the original (error from 50%, warning from 10%, note below). Each result
points at the run's results.jsonl, at the line of the first prompt the family flips. A response
run says `target` in the run's properties and calls its texts responses; with policies, the
run's properties hold the margins per policy and each result its counts per policy."""

from __future__ import annotations

import json
from typing import Any

from margin.reports.exports.bundle import ExportRun, FamilyOutcome, axes, by_policy
from margin.runfolder import dumps
from margin.util.provenance import margin_version

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = ((0.5, "error"), (0.1, "warning"), (0.0, "note"))


def level(rate: float) -> str:
    return next(name for floor, name in LEVELS if rate >= floor)


def rule_id(family: str) -> str:
    return f"margin/{family}"


def first_line(bundle: ExportRun, family: str) -> int:
    """1-based line in results.jsonl of the first prompt whose cheapest flip is in `family`."""
    for line, r in enumerate(bundle.results, start=1):
        if r.flip is not None and bundle.families.get(r.flip.transform, r.flip.transform) == family:
            return line
    return 1


def result(bundle: ExportRun, outcome: FamilyOutcome, index: int) -> dict[str, Any]:
    by_class = ", ".join(f"{outcome.flipped[k]} of {outcome.eligible[k]} {k}" for k in outcome.eligible)
    return {
        "ruleId": rule_id(outcome.family), "ruleIndex": index, "level": level(outcome.flip_rate),
        "message": {"text": f"{outcome.family} flips the guard {bundle.run.guard.id} on {outcome.total_flipped} "
                            f"of {outcome.total_eligible} {bundle.target}s right on the original "
                            f"({100 * outcome.flip_rate:.1f}%: {by_class})"},
        "locations": [{"physicalLocation": {
            "artifactLocation": {"uri": f"{bundle.source.rstrip('/')}/results.jsonl"},
            "region": {"startLine": first_line(bundle, outcome.family)}}}],
        "properties": {"flip_rate": outcome.flip_rate, "flipped": outcome.flipped, "eligible": outcome.eligible,
                       **({"by_policy": by_policy(bundle, outcome)} if bundle.by_policy else {})},
    }


def log(bundle: ExportRun) -> dict[str, Any]:
    counted = "every candidate asked" if bundle.exhaustive else f"{bundle.target}s' cheapest flips"
    rules = [{"id": rule_id(o.family), "name": o.family,
              "shortDescription": {"text": f"the {o.family} transform family flips the guard's verdict"},
              "fullDescription": {"text": f"Counted from {counted}: {bundle.say(bundle.family_method)}"},
              "defaultConfiguration": {"level": "warning"}} for o in bundle.outcomes]
    results = [result(bundle, o, i) for i, o in enumerate(bundle.outcomes) if o.total_flipped]
    record = bundle.record
    return {
        "$schema": SCHEMA, "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "margin", "version": margin_version(),
                                "rules": rules}},
            "results": results,
            "properties": {"guard": bundle.run.guard.id, "balanced_margin": record.balanced_margin,
                           "unsafe_margin": record.unsafe_margin, "safe_margin": record.safe_margin,
                           "family_method": bundle.say(bundle.family_method), **axes(bundle)},
        }],
    }


def render(bundle: ExportRun) -> str:
    return dumps(log(bundle)) + "\n"


def holds(text: str) -> str:
    """What a rendered log holds, counted from it (for the `wrote` line)."""
    run = json.loads(text)["runs"][0]
    return (f"{len(run['tool']['driver']['rules'])} rules, one per transform family; {len(run['results'])} results, "
            "one per family that flips the guard")
