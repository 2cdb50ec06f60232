"""Replay: a verdict source that answers from recorded verdicts and calls no guard.

Verdicts come from margin receipts (`kind == "call"` lines; a non-null verdict is a verdict,
a null one records an attempt without output; other kinds and unknown fields are ignored)
or from JSONL written elsewhere, one `{prompt_id, transform, strength, seed, verdict}` per
line (optional `p_unsafe`, `raw`; the original prompt has transform and strength null).
Several files merge in order: a later verdict for the same candidate wins.

A candidate with no recorded verdict is answered None: missing, exactly like a call that
never produced output. Where a receipt recorded the text's SHA-256, the rebuilt candidate's
text must match it, so a changed transform or dataset cannot pass silently.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.reports.observations import VerdictKey
from margin.runfolder import read_records
from margin.search.strategies import PromptSearch
from margin.types import Candidate, SearchResult, Verdict
from margin.util.hashing import sha256_text

VERDICT_LABELS = ("safe", "unsafe", "invalid")


@dataclass(frozen=True, slots=True)
class Recorded:
    verdict: Verdict | None  # None: attempts were recorded, none produced output
    text_sha256: str | None
    where: str  # file:line of the line that decided it


@dataclass
class RecordedVerdicts:
    by_key: dict[VerdictKey, Recorded] = field(default_factory=dict)
    guard_id: str | None = None  # the guard the receipts name (None for external verdicts only)
    lines: int = 0  # call or verdict lines read


def candidate_key(candidate: Candidate) -> VerdictKey:
    return (candidate.prompt_id, candidate.transform, candidate.strength, candidate.seed)


def _text(record: Mapping[str, Any], name: str, where: str, *, nullable: bool) -> str | None:
    value = record.get(name)
    if value is None:
        if nullable:
            return None
        raise InputError("missing field", path=where, field=name)
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError("must be a string", path=where, field=name)
    return str(value)


def parse_line(record: Mapping[str, Any], where: str) -> tuple[VerdictKey, Verdict | None, str | None]:
    """One receipt call line or one external verdict line -> (key, verdict, text sha)."""
    prompt_id = _text(record, "prompt_id", where, nullable=False)
    transform = _text(record, "transform", where, nullable=True)
    strength = _text(record, "strength", where, nullable=True)
    if (transform is None) != (strength is None):
        raise InputError("transform and strength are both null (the original) or both set",
                         path=where, field="strength")
    seed = record.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError("must be an integer", path=where, field="seed")
    label = record.get("verdict")
    verdict = None
    if label is not None:
        if label not in VERDICT_LABELS:
            raise InputError(f"unknown verdict {label!r}; expected safe, unsafe or invalid",
                             path=where, field="verdict")
        p = record.get("p_unsafe")
        if p is not None and (isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p <= 1):
            raise InputError("must be a number in [0, 1] or null", path=where, field="p_unsafe")
        verdict = Verdict(label, None if p is None else float(p), str(record.get("raw") or ""))
    sha = record.get("text_sha256")
    assert prompt_id is not None
    return (prompt_id, transform, strength, seed), verdict, sha if isinstance(sha, str) else None


def read_verdicts(paths: Sequence[Path], recorded: RecordedVerdicts | None = None) -> RecordedVerdicts:
    """Merge verdict files in order; later verdicts win, attempts without output never
    overwrite a verdict. Receipts of two different guards are refused."""
    out = recorded or RecordedVerdicts()
    for path in paths:
        for number, record in enumerate(read_records(path), start=1):
            kind = record.get("kind")
            if kind is not None and kind != "call":
                continue  # results and any record kind added later
            where = f"{path}:{number}"
            if kind == "call":
                guard = record.get("guard_id")
                if out.guard_id is None:
                    out.guard_id = guard
                elif guard != out.guard_id:
                    raise InputError(f"receipts of guard {guard!r} mixed with guard {out.guard_id!r}",
                                     path=path, line=number)
            elif "verdict" not in record:
                raise InputError("a verdict line needs prompt_id, transform, strength, seed and verdict",
                                 path=path, line=number, field="verdict")
            elif record["verdict"] is None:
                raise InputError("must be safe, unsafe or invalid", path=path, line=number, field="verdict")
            key, verdict, sha = parse_line(record, where)
            out.lines += 1
            if verdict is not None or key not in out.by_key:
                out.by_key[key] = Recorded(verdict, sha, where)
    return out


class ReplaySource:
    """Answers searches' requests from recorded verdicts; records which keys it was asked."""

    def __init__(self, recorded: Mapping[VerdictKey, Recorded]) -> None:
        self.recorded = recorded
        self.asked: set[VerdictKey] = set()

    def run(self, searches: Sequence[PromptSearch]) -> list[SearchResult]:
        """Every search to completion on recorded verdicts, calling no guard. A search's
        result does not depend on how many candidates it is handed at once, so each is
        simply given all it asks for."""
        for search in searches:
            while not search.done:
                requests = search.next_requests(1 << 30)
                if not requests:
                    raise RuntimeError(f"search for {search.prompt.id!r} waits but asks for nothing")
                for candidate in requests:
                    search.receive(candidate, self.verdict(candidate))
        return [search.result() for search in searches]

    def verdict(self, candidate: Candidate) -> Verdict | None:
        key = candidate_key(candidate)
        self.asked.add(key)
        found = self.recorded.get(key)
        if found is None:
            return None
        check_text(candidate, found)
        return found.verdict


def check_text(candidate: Candidate, found: Recorded) -> None:
    if found.text_sha256 is not None and found.text_sha256 != sha256_text(candidate.text):
        path, _, line = found.where.rpartition(":")
        raise InputError(
            f"the recorded text of {candidate.transform or 'the original'} @ {candidate.strength} for prompt "
            f"{candidate.prompt_id!r} is not the rebuilt candidate's text: the dataset, suite or "
            "transforms changed since the run", path=path, line=int(line))


def unmatched(recorded: Mapping[VerdictKey, Recorded], keys: Iterable[VerdictKey]) -> list[Recorded]:
    """Recorded verdicts that belong to no rebuilt candidate (another suite, seed or dataset)."""
    known = set(keys)
    return [r for k, r in recorded.items() if k not in known]
