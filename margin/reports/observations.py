"""What a run observed per prompt: the original's verdict and each candidate's, with its cost.

Threshold sweeps, invariance and per-transform effectiveness read these; they come either
from a run's receipts (`from_receipts` of their `read_calls`) or from searches replayed by
`margin score`. Receipts are read tolerantly: only `kind == "call"` lines matter (`CallLine`), a
line's non-null verdict is a verdict, a later verdict for the same candidate wins, and unknown
fields are ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from margin.types import Label, SearchResult, Verdict, VerdictLabel

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


@dataclass(frozen=True, slots=True)
class CallLine:
    """What a receipt's `call` line says about one attempt at a candidate's verdict."""

    prompt_id: str
    transform: str | None  # None: the original prompt
    strength: str | None
    seed: int
    label: VerdictLabel | None  # None: no output on this attempt
    p_unsafe: float | None
    raw: str
    reply: VerdictLabel | None  # the reply's own label, where a threshold decided against it
    cost: float
    attempt: int  # 0: answered without asking the guard (a cache or recorded verdict)
    cached: bool

    @property
    def key(self) -> VerdictKey:
        return (self.prompt_id, self.transform, self.strength, self.seed)

    @property
    def verdict(self) -> Verdict | None:
        return None if self.label is None else Verdict(self.label, self.p_unsafe, self.raw, self.reply)


def read_calls(lines: Iterable[Mapping[str, Any]]) -> list[CallLine]:
    """The `call` lines of a run's receipts (other kinds and unknown fields are left out)."""
    calls = []
    for line in lines:
        if line.get("kind") != "call":
            continue
        p = line.get("p_unsafe")
        calls.append(CallLine(
            prompt_id=str(line["prompt_id"]), transform=line.get("transform"), strength=line.get("strength"),
            seed=int(line.get("seed") or 0), label=line.get("verdict"), p_unsafe=None if p is None else float(p),
            raw=line.get("raw") or "", reply=line.get("reply"), cost=float(line.get("cost") or 0.0),
            attempt=int(line.get("attempt") or 0), cached=bool(line.get("cached"))))
    return calls


def from_receipts(calls: Iterable[CallLine], results: Iterable[SearchResult]) -> list[PromptObservations]:
    """Observations for every prompt of `results` (labels and types come from there)."""
    verdicts: dict[VerdictKey, Verdict | None] = {}
    costs: dict[VerdictKey, float] = {}
    for call in calls:
        key = call.key
        verdict = call.verdict
        if verdict is not None or key not in verdicts:
            verdicts[key] = verdict
        costs[key] = call.cost
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


def coverage(calls: Iterable[CallLine]) -> CallCoverage:
    final: dict[VerdictKey, str | None] = {}
    scores: dict[VerdictKey, tuple[bool, bool]] = {}  # (has p_unsafe, contradicts its reply)
    attempts = failed = hits = 0
    for call in calls:
        key = call.key
        verdict = call.label
        if verdict is not None or key not in final:
            final[key] = verdict
            scores[key] = (call.p_unsafe is not None, call.reply is not None)
        if call.cached:
            hits += 1
        elif call.attempt >= 1:
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
