"""A run folder on disk, written and read: `run.json`, receipts (append-only JSONL), results
JSONL, written atomically and never through a link (`margin.util.safefiles`); and `load_run`,
which reads a finished folder back.

Each problem reading a folder is one InputError naming the file (and line), so `score`,
`report`, `publish` and `integral` refuse a broken folder the same way.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from pathlib import Path
from typing import IO, Any

from margin.errors import InputError
from margin.runrecord import RunRecord, record_from_json
from margin.types import Flip, GuardCall, GuardInfo, SearchResult
from margin.util.hashing import sha256_text
from margin.util.safefiles import atomic_write_text, open_append


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


def call_record(run_id: str, guard_id: str, call: GuardCall, target: str | None = None) -> dict[str, Any]:
    """`target`: a response run's (None for a prompt run, whose lines keep the fields they always had)."""
    c, v = call.candidate, call.verdict
    return {
        "kind": "call",
        "run_id": run_id,
        "guard_id": guard_id,
        **({"target": target} if target is not None else {}),
        "prompt_id": c.prompt_id,
        "transform": c.transform,
        "strength": c.strength,
        "seed": c.seed,
        "cost": c.cost,
        "text_sha256": sha256_text(c.text),
        "verdict": v.label if v else None,
        "p_unsafe": v.p_unsafe if v else None,
        "raw": v.raw if v else None,
        "latency_s": round(call.latency_s, 6),
        "attempt": call.attempt,
        "cached": call.cached,
        "error": call.error,
        **({"charged": call.charged} if v is None and not call.cached else {}),
        **({"reply": v.reply} if v is not None and v.reply is not None else {}),
        **({"input_sha256": call.input_sha256} if call.input_sha256 is not None else {}),
    }


def flip_record(flip: Flip | None) -> dict[str, Any] | None:
    if flip is None:
        return None
    return {
        "transform": flip.transform,
        "strength": flip.strength,
        "seed": flip.seed,
        "cost": flip.cost,
        "verdict": flip.verdict,
        "text": flip.text,
    }


def result_record(result: SearchResult) -> dict[str, Any]:
    record: dict[str, Any] = {
        "prompt_id": result.prompt_id,
        "label": result.label,
        "type": result.type,
        "status": result.status,
        "clean_verdict": result.clean_verdict,
        "flip_cost": result.flip_cost,
        "capped": result.capped,
        "flip": flip_record(result.flip),
        "guard_calls": result.guard_calls,
    }
    if result.extra:
        record["tags"] = dict(result.extra)
    return record


def result_from_record(record: dict[str, Any]) -> SearchResult:
    flip = record.get("flip")
    return SearchResult(
        prompt_id=record["prompt_id"],
        label=record["label"],
        type=record.get("type", ""),
        clean_verdict=record["clean_verdict"],
        flip_cost=record["flip_cost"],
        capped=record["capped"],
        flip=Flip(**flip) if flip else None,
        guard_calls=record["guard_calls"],
        status=record.get("status", "scored"),
        extra=tuple(sorted((record.get("tags") or {}).items())),
    )


class ReceiptWriter:
    """Append-only JSONL: one line per guard call attempt and one per prompt result.

    Lines are buffered and written out by `flush`, which the driver calls after each batch
    of outcomes, so a killed run leaves whole lines up to its last batch and at most one
    torn last line (resume cuts it); a call whose line was lost is simply made again. Every
    `sync_every_s` a flush is also a checkpoint: fsync, so the lines survive a crash of the
    machine too.
    """

    def __init__(self, path: Path, run_id: str, guard_id: str, *, sync_every_s: float = 30.0,
                 target: str | None = None) -> None:
        """`target`: a response run's target, written on every call line (the edited turn is the
        case's last: the text `text_sha256` names); None for a prompt run."""
        self.path = path
        self.run_id = run_id
        self.guard_id = guard_id
        self.sync_every_s = sync_every_s
        self._handle: IO[str] = open_append(path, buffering=1 << 20)  # closed by close()
        target_field = "" if target is None else f'"target": {_json_str(target)}, '
        self._head = (f'{{"kind": "call", "run_id": {_json_str(run_id)}, "guard_id": {_json_str(guard_id)}, '
                      f'{target_field}')
        self._synced = time.monotonic()

    def call(self, call: GuardCall) -> None:
        self._handle.write(call_line(self._head, call))

    def result(self, result: SearchResult) -> None:
        self._handle.write(dumps({"kind": "result", "run_id": self.run_id, **result_record(result)}) + "\n")

    def flush(self) -> None:
        self._handle.flush()
        if time.monotonic() - self._synced >= self.sync_every_s:
            self._sync()

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.flush()
            self._sync()
            self._handle.close()

    def _sync(self) -> None:
        os.fsync(self._handle.fileno())
        self._synced = time.monotonic()


# A call's receipt line is written field by field: exactly the bytes of
# `dumps(call_record(...)) + "\n"` (tests/test_records.py checks it), at a fraction of the
# cost of building a dict and encoding it, which a run does for every candidate.
_json_str = encode_basestring  # a str as json.dumps(ensure_ascii=False) writes it


def _json_float(value: float | None) -> str:
    if value is None:
        return "null"
    if value != value:
        return "NaN"
    if value in (math.inf, -math.inf):
        return "Infinity" if value > 0 else "-Infinity"
    return float.__repr__(value)


def call_line(head: str, call: GuardCall) -> str:
    """`head` holds the fields every line of a writer shares (kind, run_id, guard_id)."""
    c, v = call.candidate, call.verdict
    verdict = (f'"verdict": {_json_str(v.label)}, "p_unsafe": {_json_float(v.p_unsafe)}, "raw": {_json_str(v.raw)}'
               if v else '"verdict": null, "p_unsafe": null, "raw": null')
    # A cost is finite (a distance over a positive length) and so is a latency: plain reprs.
    return (f'{head}"prompt_id": {_json_str(c.prompt_id)}, '
            f'"transform": {"null" if c.transform is None else _json_str(c.transform)}, '
            f'"strength": {"null" if c.strength is None else _json_str(c.strength)}, "seed": {int.__repr__(c.seed)}, '
            f'"cost": {float.__repr__(c.cost)}, "text_sha256": "{sha256_text(c.text)}", {verdict}, '
            f'"latency_s": {float.__repr__(round(call.latency_s, 6))}, "attempt": {int.__repr__(call.attempt)}, '
            f'"cached": {"true" if call.cached else "false"}, '
            f'"error": {"null" if call.error is None else _json_str(call.error)}'
            f'{_charged(call)}{_reply(call)}{_input(call)}}}\n')


def _input(call: GuardCall) -> str:
    """A guard that sees whole cases: the SHA-256 of the case it was asked about."""
    return "" if call.input_sha256 is None else f', "input_sha256": {_json_str(call.input_sha256)}'


def _reply(call: GuardCall) -> str:
    """A verdict the threshold decided against its reply's text names the reply's label."""
    v = call.verdict
    return "" if v is None or v.reply is None else f', "reply": {_json_str(v.reply)}'


def _charged(call: GuardCall) -> str:
    """An attempt without output says whether it used up one of the text's attempts (a wait
    did not); answered and cached lines have no such field."""
    if call.verdict is not None or call.cached:
        return ""
    return ', "charged": true' if call.charged else ', "charged": false'


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete JSON line; a torn last line (a killed writer) is skipped."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if number >= len(lines) - 1:  # only the last line may be torn
                return
            raise ValueError(f"{path}:{number}: corrupt JSON line") from None


def write_results(path: Path, results: Iterable[SearchResult]) -> None:
    atomic_write_text(path, "".join(dumps(result_record(r)) + "\n" for r in results))


@dataclass(frozen=True)
class RunDir:
    path: Path
    record: RunRecord
    results: list[SearchResult]

    @property
    def receipts_path(self) -> Path:
        return self.path / "receipts.jsonl"

    def receipts(self) -> Iterator[dict[str, Any]]:
        return read_records(self.receipts_path)

    @property
    def manifest(self) -> dict[str, Any]:
        """run.json's object (what exports and the API hand on as it is)."""
        return self.record.to_json()

    @property
    def guard(self) -> GuardInfo:
        return self.record.guard

    @property
    def budget(self) -> float:
        return float(self.record.budget)

    @property
    def search(self) -> str:
        return self.record.search


def read_json(path: Path) -> Any:
    """A JSON file, or one InputError naming it (and the line of a syntax error)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read ({exc})", path=path) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON ({exc.msg})", path=path, line=exc.lineno) from None


def read_run_record(folder: Path) -> RunRecord:
    """The record a run folder's run.json holds: the one reader of run.json."""
    path = folder / "run.json"
    if not path.is_file():
        raise InputError("not a run folder (no run.json)", path=folder)
    return record_from_json(read_json(path), path)


def write_run_record(folder: Path, record: RunRecord) -> None:
    atomic_write_text(folder / "run.json", dumps(record.to_json()) + "\n")


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise InputError("no such file", path=path)
    try:
        yield from read_jsonl(path)
    except ValueError as exc:  # a corrupt line that is not the torn last one
        raise InputError(str(exc), path=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 ({exc.reason})", path=path) from None


def read_results(path: Path) -> list[SearchResult]:
    """The results a results.jsonl holds, or the result lines of a receipts.jsonl (its call
    lines skipped): the one reader of result records, refusing a bad one by file and line."""
    results = []
    for number, record in enumerate(read_records(path), start=1):
        if record.get("kind", "result") != "result":
            continue
        try:
            results.append(result_from_record(record))
        except (KeyError, TypeError) as exc:
            raise InputError(f"not a result record ({exc})", path=path, line=number) from None
        cost = record["flip_cost"]  # every figure is built from these: NaN would become NaN margins
        if cost is not None and (isinstance(cost, bool) or not isinstance(cost, int | float)
                                 or not math.isfinite(cost)):  # None: a missing prompt
            raise InputError(f"expected a finite number, not {cost!r}", path=path, line=number, field="flip_cost")
    return results


def folder_results(folder: Path) -> list[SearchResult]:
    """A run folder's results: results.jsonl, else (a killed run) the results its receipts
    reached, else none."""
    for name in ("results.jsonl", "receipts.jsonl"):
        if (folder / name).is_file():
            return read_results(folder / name)
    return []


def load_run(path: Path) -> RunDir:
    """A run folder with its record and results (receipts are read on demand)."""
    if not path.is_dir():
        raise InputError("no such run folder", path=path)
    return RunDir(path, read_run_record(path), read_results(path / "results.jsonl"))

