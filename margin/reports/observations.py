"""What a run observed per prompt: the original's verdict and each candidate's, with its cost.

Threshold sweeps, invariance and per-transform effectiveness read these; they come either
from a run's receipts (`from_receipts`) or from searches replayed by `margin score`.
Receipts are read tolerantly: only `kind == "call"` lines matter, a line's non-null verdict
is a verdict, a later verdict for the same candidate wins, and unknown fields are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from margin.types import Label, SearchResult, Verdict

VerdictKey = tuple[str, str | None, str | None, int]  # prompt id, transform, strength, seed


@dataclass(frozen=True, slots=True)
class Variant:
    transform: str
    strength: str
    seed: int
    cost: float
    verdict: Verdict | None  # None: no output after retries, or never recorded


@dataclass(frozen=True, slots=True)
class PromptObservations:
    prompt_id: str
    label: Label
    type: str
    original: Verdict | None
    variants: tuple[Variant, ...]  # ascending cost, ties in suite order where known

    @property
    def complete(self) -> bool:
        """Every candidate of the prompt has a verdict (what an exhaustive run gives)."""
        return self.original is not None and all(v.verdict is not None for v in self.variants)


def verdict_of(record: Mapping[str, Any]) -> Verdict | None:
    label = record.get("verdict")
    if label is None:
        return None
    p = record.get("p_unsafe")
    return Verdict(label, None if p is None else float(p), record.get("raw") or "", record.get("reply"))


def key_of(record: Mapping[str, Any]) -> VerdictKey:
    return (str(record["prompt_id"]), record.get("transform"), record.get("strength"),
            int(record.get("seed") or 0))


def from_receipts(lines: Iterable[Mapping[str, Any]],
                  results: Iterable[SearchResult]) -> list[PromptObservations]:
    """Observations for every prompt of `results` (labels and types come from there)."""
    verdicts: dict[VerdictKey, Verdict | None] = {}
    costs: dict[VerdictKey, float] = {}
    for line in lines:
        if line.get("kind") != "call":
            continue
        key = key_of(line)
        verdict = verdict_of(line)
        if verdict is not None or key not in verdicts:
            verdicts[key] = verdict
        costs[key] = float(line.get("cost") or 0.0)
    by_prompt: dict[str, list[VerdictKey]] = {}
    for key in verdicts:
        by_prompt.setdefault(key[0], []).append(key)
    out = []
    for r in results:
        keys = by_prompt.get(r.prompt_id, [])
        original = next((verdicts[k] for k in keys if k[1] is None), None)
        variants = sorted(
            (Variant(k[1], k[2] or "", k[3], costs[k], verdicts[k]) for k in keys if k[1] is not None),
            key=lambda v: v.cost)
        out.append(PromptObservations(r.prompt_id, r.label, r.type, original, tuple(variants)))
    return out


@dataclass(frozen=True, slots=True)
class CallCoverage:
    """Attempted against valid, for candidates (distinct texts asked about) and raw calls."""

    candidates: int  # distinct candidates with at least one call line
    valid: int  # ... whose final verdict is safe or unsafe
    invalid: int  # ... whose final verdict is `invalid` (a completed output, counted wrong)
    no_output: int  # ... with no output after every attempt (lost coverage)
    attempts: int  # call lines sent to the guard (attempt >= 1)
    failed_attempts: int  # ... that produced no output (retried)
    cache_hits: int  # call lines answered from a cache
    #: valid final verdicts without p_unsafe where others have one (the logprobs lacked a label)
    unscored: int = 0
    #: valid final verdicts the threshold decided against the reply's own text
    contradicted: int = 0


def coverage(lines: Iterable[Mapping[str, Any]]) -> CallCoverage:
    final: dict[VerdictKey, str | None] = {}
    scores: dict[VerdictKey, tuple[bool, bool]] = {}  # (has p_unsafe, contradicts its reply)
    attempts = failed = hits = 0
    for line in lines:
        if line.get("kind") != "call":
            continue
        key = key_of(line)
        verdict = line.get("verdict")
        if verdict is not None or key not in final:
            final[key] = verdict
            scores[key] = (line.get("p_unsafe") is not None, line.get("reply") is not None)
        if line.get("cached"):
            hits += 1
        elif int(line.get("attempt") or 0) >= 1:
            attempts += 1
            failed += verdict is None
    labels = list(final.values())
    # Only a guard that scores some verdicts lacks a score on others (a keyword guard has none).
    unscored = sum(v in ("safe", "unsafe") and not scores[k][0] for k, v in final.items())
    return CallCoverage(
        candidates=len(labels),
        valid=sum(v in ("safe", "unsafe") for v in labels),
        invalid=sum(v == "invalid" for v in labels),
        no_output=sum(v is None for v in labels),
        attempts=attempts,
        failed_attempts=failed,
        cache_hits=hits,
        unscored=unscored if any(has_p for has_p, _ in scores.values()) else 0,
        contradicted=sum(v in ("safe", "unsafe") and scores[k][1] for k, v in final.items()),
    )
