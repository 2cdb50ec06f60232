"""An inspect_ai eval log (the `.json` log format, version 2) that `inspect_ai.log.read_eval_log`
loads and `inspect view` opens: one sample per prompt, the guard as the model.

A sample's input is the original prompt, its target the label, its output the guard's
verdict on the original; its score `margin` is c_i / B (0: wrong on the original, 1: no flip
within the budget), with the cheapest flip in the explanation and metadata. A prompt with no
output after retries (lost coverage) is a sample with an error and no score. The log's
results hold the run's margins and clean accuracies as the `margin` scorer's metrics. A response
run's log and samples say `target: response` in their metadata (a sample's input is then the
response the guard judged); with policies, each sample's tags name its policy and the log's
metadata holds the margins per policy.

`inspect view` (and `inspect_ai.log.list_eval_logs`) lists a `.json` log only when its name
starts with an ISO timestamp: inspect names its own `{created}_{task}_{id}.json`, each part
with `_`, `/`, `:` and `+` made `-`. `file_name` gives a run that name; its id is a digest of
the run's `run.json` and `results.jsonl`, so the same run gets the same name and bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from margin.reports.bootstrap import FIGURES
from margin.reports.exports.bundle import ExportRun, axes
from margin.runfolder import RunDir, dumps, flip_record
from margin.types import SearchResult

TASK = "margin"
# inspect_ai.log._file.log_file_pattern: what a .json file's name must match to be listed
LISTED = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}[:-]\d{2}[:-]\d{2}.*\.json$")


def log_id(run: RunDir) -> str:
    """22 hex digits (inspect's ids are 22 characters) of the run's record and results."""
    digest = hashlib.sha256()
    for name in ("run.json", "results.jsonl"):
        digest.update((run.path / name).read_bytes())
    return digest.hexdigest()[:22]


def name_part(text: str) -> str:
    """One part of an inspect log name, as inspect cleans it (`_` separates the parts)."""
    return re.sub(r"[_/:+]", "-", text)


def file_name(bundle: ExportRun) -> str:
    return f"{name_part(bundle.created)}_{TASK}_{log_id(bundle.run)}.json"


def listed(name: str) -> bool:
    """Whether `inspect view` lists a .json log of this file name."""
    return LISTED.match(name) is not None


def explanation(result: SearchResult, budget: float) -> str:
    if result.flip_cost == 0:
        return f"the original is already wrong (verdict {result.clean_verdict}): flip cost 0"
    if result.flip is None:
        return f"no tested transformation within the budget {budget:g} flips the verdict"
    f = result.flip
    return f"cheapest flip: {f.transform} {f.strength} (cost {f.cost:.2f}) reads {f.verdict}"


def sample(result: SearchResult, text: str, budget: float, target: str = "prompt") -> dict[str, Any]:
    metadata = {"label": result.label, "type": result.type, "status": result.status,
                "flip_cost": result.flip_cost, "capped": result.capped, "flip": flip_record(result.flip),
                "guard_calls": result.guard_calls, "tags": dict(result.extra),
                **({"target": target} if target != "prompt" else {})}
    out: dict[str, Any] = {
        "id": result.prompt_id, "epoch": 1, "input": text, "target": result.label,
        "messages": [{"role": "user", "content": text}],
        "metadata": metadata,
    }
    if result.status != "scored" or result.flip_cost is None:
        out["error"] = {"message": "no output after retries: lost coverage, never scored", "traceback": "",
                        "traceback_ansi": ""}
        return out
    verdict = result.clean_verdict or "invalid"
    out["messages"].append({"role": "assistant", "content": verdict})
    out["output"] = {"model": "guard", "choices": [{"message": {"role": "assistant", "content": verdict},
                                                    "stop_reason": "stop"}], "completion": verdict}
    out["scores"] = {"margin": {"value": min(result.flip_cost, budget) / budget, "answer": verdict,
                                "explanation": explanation(result, budget),
                                "metadata": {"flip_cost": result.flip_cost, "flip": flip_record(result.flip)}}}
    return out


def eval_log(bundle: ExportRun) -> dict[str, Any]:
    run, record = bundle.run, bundle.record
    budget = run.budget
    samples = [sample(r, bundle.texts.get(r.prompt_id, ""), budget, bundle.target) for r in bundle.results]
    scored = sum(1 for r in bundle.results if r.status == "scored")
    metrics = {name: {"name": name, "value": record.figure(name)} for name in FIGURES
               if record.figure(name) is not None}
    manifest = run.manifest
    return {
        "version": 2,
        "status": "success",
        "eval": {
            "created": bundle.created, "task": TASK, "task_id": log_id(run),
            "task_version": 1, "task_args": {"protocol": manifest.get("protocol"),
                                             "suite": manifest["suite"].get("name"), "budget": budget,
                                             "search": run.search, "cost_norm": manifest.get("cost_norm")},
            "dataset": {"name": manifest["dataset"].get("name"), "location": manifest["dataset"].get("source"),
                        "samples": len(samples), "sample_ids": [s["id"] for s in samples]},
            "model": f"margin/{run.guard.id}", "config": {},
            "metadata": {"margin_run": manifest, "confidence_intervals": record.confidence_intervals,
                         **axes(bundle)},
        },
        "results": {"total_samples": len(samples), "completed_samples": scored,
                    "scores": [{"name": "margin", "scorer": "margin", "metrics": metrics}]},
        "stats": {"started_at": bundle.created, "completed_at": bundle.created},
        "samples": samples,
    }


def render(bundle: ExportRun) -> str:
    return dumps(eval_log(bundle)) + "\n"


def holds(text: str) -> str:
    """What a rendered log holds, counted from it (for the `wrote` line)."""
    log = json.loads(text)
    samples = log["samples"]
    scored = sum(1 for s in samples if "scores" in s)
    target = log["eval"]["metadata"].get("target", "prompt")
    return f"{len(samples)} samples, one per {target}: {scored} scored, {len(samples) - scored} lost"
