"""What each pair of a study rests on: the guard verdicts, responses and judge outputs asked
for and missing, and the first error recorded for what is missing (read from the receipts,
so a resumed study reads the same). A pair with anything missing is incomplete: the site
never draws it as "none found", and `margin publish` refuses it unless told otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from margin.reports.completeness import PairCoverage
from margin.studies.plan import StudyPlan
from margin.studies.rates import Layer
from margin.studies.responses import ResponseOutcome
from margin.studies.stacks import GuardPlan
from margin.studies.verdicts import StackVerdicts, guard_error, receipt_lines
from margin.types import Verdict


def call_errors(path: Path) -> dict[tuple[str, str], str]:
    """(role, protected model) -> the first error recorded in `calls.jsonl` for a request that
    never got an output (role `response` or `judgement`)."""
    lines = [line for line in receipt_lines(path) if line.get("kind") == "call"]
    answered = {line.get("key") for line in lines if line.get("output") is not None}
    first: dict[tuple[str, str], str] = {}
    for line in lines:
        if line.get("key") not in answered and line.get("error"):
            first.setdefault((str(line.get("role")), str(line.get("model"))), str(line["error"]))
    return first


def pair_coverages(plan: StudyPlan, verdicts: Mapping[str, StackVerdicts], calls: ResponseOutcome,
                   calls_path: Path, guard_receipts: Mapping[tuple[str, Layer], Path]) -> dict[tuple[str, str], PairCoverage]:
    """(guard stack id, model id) -> the pair's coverage (PairCoverage.of);
    its guard verdicts are the input guard's and the output guard's on that model's responses.
    `guard_receipts`: (guard id, layer) -> the receipts that guard's verdicts are in."""
    errors = call_errors(calls_path)
    out = {}
    for stack in plan.guards:
        said = verdicts[stack.id]
        inputs = list(said.inputs.values()) if said.inputs is not None else []
        for model in plan.models:
            outputs = ([v for key, v in said.outputs.items() if key.model == model.id]
                       if said.outputs is not None else [])
            guard_missing = sum(v is None for v in [*inputs, *outputs])
            layers: tuple[tuple[GuardPlan | None, Layer, list[Verdict | None]], ...] = (
                (stack.input, "input_guard", inputs), (stack.output, "output_guard", outputs))
            guard_reason = next((f"guard {g.id}: {guard_error(guard_receipts[(g.id, layer)]) or 'no verdict'}"
                                 for g, layer, per in layers if g is not None and any(v is None for v in per)), None)
            responses = [v for key, v in calls.responses.items() if key.model == model.id]
            judged = [v for key, v in calls.judgements.items() if key.model == model.id]
            asked = {"guard_verdicts": len(inputs) + len(outputs), "responses": len(responses),
                     "judge_outputs": len(judged)}
            missing = {"guard_verdicts": guard_missing, "responses": sum(r is None for r in responses),
                       "judge_outputs": sum(j is None for j in judged)}
            reasons = ([guard_reason] if guard_reason else []) + [
                f"{what} {model.id}: {errors.get((role, model.id), 'no output')}"
                for role, what, kind in (("response", "model", "responses"), ("judgement", "judge of", "judge_outputs"))
                if missing[kind]]
            out[(stack.id, model.id)] = PairCoverage.of(asked, missing, reasons[0] if reasons else None)
    return out
