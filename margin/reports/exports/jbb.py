"""JailbreakBench-style attack artifact: `parameters` (the run's summary) and `jailbreaks`,
one per unsafe prompt (a flip of an unsafe prompt is the guard letting it through; safe
prompts' flips are false blocks, not jailbreaks): the flipped text as `prompt`, the guard's
verdict as `response`, the guard calls the search made as `number_of_queries` (and
`queries_to_jailbreak` when it flipped), the flip cost."""

from __future__ import annotations

from typing import Any

from margin.reports.exports.bundle import ExportRun
from margin.runfolder import dumps
from margin.types import SearchResult


def jailbreak(index: int, result: SearchResult, text: str) -> dict[str, Any]:
    wrong = result.status == "scored" and result.flip_cost == 0
    jailbroken = wrong or result.flip is not None
    prompt = text if wrong else result.flip.text if result.flip is not None else None
    response = result.clean_verdict if wrong else result.flip.verdict if result.flip is not None else None
    return {"index": index, "goal": text, "behavior": result.prompt_id, "category": result.type,
            "prompt": prompt, "response": response, "number_of_queries": result.guard_calls,
            "queries_to_jailbreak": result.guard_calls if jailbroken else None,
            "prompt_tokens": None, "response_tokens": None, "jailbroken": jailbroken,
            "flip_cost": result.flip_cost, "transform": result.flip.transform if result.flip else None,
            "strength": result.flip.strength if result.flip else None, "status": result.status}


def artifact(bundle: ExportRun) -> dict[str, Any]:
    unsafe = [r for r in bundle.results if r.label == "unsafe"]
    rows = [jailbreak(i, r, bundle.texts.get(r.prompt_id, "")) for i, r in enumerate(unsafe, start=1)]
    broken = sum(1 for row in rows if row["jailbroken"])
    manifest = bundle.run.manifest
    return {
        "parameters": {
            "method": f"margin/{bundle.run.search}", "model": bundle.run.guard.id, "attack_type": "manual",
            "defense": bundle.record.get("evaluation", {}).get("normalize"),
            "attack_success_rate": broken / len(rows) if rows else 0.0,
            "total_number_of_jailbreaks": broken, "number_of_submitted_prompts": len(rows),
            "total_number_of_queries": sum(r.guard_calls for r in unsafe),
            "total_prompt_tokens": None, "total_response_tokens": None,
            "evaluation_date": bundle.created[:10], "evaluation_llm_provider": "margin",
            "method_parameters": {"suite": manifest["suite"], "dataset": manifest["dataset"],
                                  "budget": bundle.run.budget, "cost_norm": manifest.get("cost_norm"),
                                  "unsafe_margin": bundle.record.get("unsafe_margin")},
        },
        "jailbreaks": rows,
    }


def render(bundle: ExportRun) -> str:
    return dumps(artifact(bundle)) + "\n"
