"""Datasets: XSTest-format prompts from a file, the pinned XSTest upstream, or the bundled sample;
cases beyond one prompt (`cases`: a conversation, a response target, a policy, context); and
labelled completions read as response cases (`completions`).

Every file is validated in full before any guard call. A problem raises one InputError that
names the file and the line (or row) where it is.
"""

from __future__ import annotations

import csv
import io
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from margin.datasets.cases import CASE_COLUMNS, POLICY_TAG, Policies, case_parts, read_policies
from margin.datasets.completions import is_completions, read_labels, response_cases
from margin.errors import InputError
from margin.types import TARGETS, Label, Prompt, Target
from margin.util.hashing import sha256_bytes

COLUMNS = ("id", "prompt", "type", "label", "focus", "note")
REQUIRED = ("id", "prompt", "label")  # `messages` may stand for `prompt` (cases.py)
VALID_LABELS: tuple[Label, ...] = ("safe", "unsafe")
# One row-size rule for every text format: a JSONL line, or a CSV row's fields together, at most
# this many characters (CSV's own per-field limit, 128 Ki). A longer row is refused naming its line.
MAX_ROW_CHARS = 131_072


def _row_too_long(path: str | Path, line: int) -> InputError:
    return InputError(f"row longer than {MAX_ROW_CHARS:,} characters (the limit for a dataset row)",
                      path=path, line=line)

# XSTest (Röttger et al., NAACL 2024; CC BY 4.0), pinned to one upstream commit.
XSTEST_URL = (
    "https://raw.githubusercontent.com/paul-rottger/exaggerated-safety/"
    "d7bb5bd738c1fcbc36edd83d5e7d1b71a3e2d84d/xstest_prompts.csv"
)
XSTEST_SHA256 = "11783fb294ed017473ee53c207d71f2161c7672c8d0b037501e78387f801cb5a"
XSTEST_ENV = "MARGIN_XSTEST"


@dataclass(frozen=True, slots=True)
class Dataset:
    name: str
    source: str
    sha256: str
    prompts: tuple[Prompt, ...]
    #: the line (or row) each prompt was read from, by id: errors found later name it
    lines: dict[str, int] | None = None
    target: Target = "prompt"
    policies: Policies | None = None  # the `--policies` file the cases' policy ids were read from

    @property
    def texts(self) -> list[str]:
        return [p.text for p in self.prompts]


def cache_dir() -> Path:
    """Where margin keeps downloads and its verdict cache."""
    if env := os.environ.get("MARGIN_CACHE_DIR"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "margin"


def load_dataset(spec: str, target: Target = "prompt", policies: str | None = None) -> Dataset:
    """`sample`, `xstest`, or a path to a .csv, .jsonl or .parquet file, its cases judged at
    `target` (the built-ins are prompts only); with `policies`, a YAML file whose ids the cases'
    `policy` cells name."""
    if target not in TARGETS:
        raise InputError(f"unknown target {target!r}; expected prompt or response", field="--target")
    if spec in ("sample", "xstest") and target != "prompt":
        raise InputError(f"{spec} holds prompts only; a {target} run needs a file of {target} cases "
                         "(docs/datasets.md#cases-beyond-one-prompt)", field="--target")
    if policies is not None and spec in ("sample", "xstest"):
        raise InputError(f"{spec} has no policy column", field="--policies")
    if spec == "sample":
        data = resources.files("margin").joinpath("data", "sample.csv").read_bytes()
        return Dataset("sample", "margin/data/sample.csv", sha256_bytes(data),
                       parse_bytes(data, "sample.csv", "csv"))
    if spec == "xstest":
        path = xstest_path()
        data = path.read_bytes()
        return Dataset("xstest", XSTEST_URL, sha256_bytes(data), parse_bytes(data, path, "csv"))
    path = Path(spec)
    if not path.is_file():
        raise InputError("no such dataset file (expected sample, xstest or a path)", path=spec)
    fmt = _format_of(path)
    data = path.read_bytes()
    if fmt == "csv" and is_completions(_decode(data, path)):
        if policies is not None:
            raise InputError("a completions file has no policy column", path=path, field="--policies")
        if target != "response":
            raise InputError("a completions file (prompt, completion and final_label columns) holds response cases: "
                             "pass --target response", path=path, field="--target")
        labels = read_labels(path)
        return Dataset(path.name, str(path), labels.sha256, response_cases(labels),
                       {c.id: c.line for c in labels.cases}, target)
    found: dict[str, int] = {}
    read = read_policies(policies) if policies is not None else None
    prompts = parse_bytes(data, path, fmt, target, lines=found, policies=read)
    return Dataset(path.name, str(path), sha256_bytes(data), prompts, found, target, read)


def _format_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix in (".csv",):
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise InputError(f"unknown dataset format {suffix!r}; use .csv, .jsonl or .parquet", path=path)


def xstest_path() -> Path:
    """The pinned XSTest file: $MARGIN_XSTEST (checksum-verified and copied into the cache, so
    a later `score` or `merge` finds it without the variable), else the cache, else a
    checksum-verified download."""
    cached = cache_dir() / "xstest" / f"{XSTEST_SHA256}.csv"
    if env := os.environ.get(XSTEST_ENV):
        path = Path(env)
        if not path.is_file():
            raise InputError(f"{XSTEST_ENV} points at a missing file", path=path)
        data = path.read_bytes()
        _verify(data, path)
        if not cached.is_file():
            _store(cached, data)
        return path
    if cached.is_file():
        _verify(cached.read_bytes(), cached)
        return cached
    try:
        with urllib.request.urlopen(XSTEST_URL, timeout=30) as response:
            data = response.read()
    except (urllib.error.URLError, OSError) as exc:
        raise InputError(
            f"cannot download XSTest from {XSTEST_URL} ({exc}); pass a local copy with "
            f"--dataset PATH/xstest_prompts.csv or set {XSTEST_ENV}=PATH"
        ) from None
    _verify(data, XSTEST_URL)
    _store(cached, data)
    return cached


def _store(cached: Path, data: bytes) -> None:
    """Write the verified bytes into the cache, whole or not at all (a unique temp file, renamed)."""
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, cached)


def _verify(data: bytes, where: str | Path) -> None:
    digest = sha256_bytes(data)
    if digest != XSTEST_SHA256:
        raise InputError(
            f"SHA-256 {digest} is not the pinned XSTest {XSTEST_SHA256}; "
            "pass a modified copy as --dataset PATH instead",
            path=where,
        )


def parse_bytes(data: bytes, path: str | Path, fmt: str, target: Target = "prompt", *,
                lines: dict[str, int] | None = None, policies: Policies | None = None) -> tuple[Prompt, ...]:
    """Parse and validate a whole dataset file; rows are (line or row number, fields). `lines`,
    when given, is filled with each prompt's line."""
    if not data.strip():
        raise InputError("empty file", path=path)
    if fmt == "parquet":
        rows, columns = _parquet_rows(data, path)
    else:
        text = _decode(data, path)
        rows, columns = _csv_rows(text, path) if fmt == "csv" else _jsonl_rows(text, path)
    missing = [c for c in _required(columns) if c not in columns]
    if missing:
        raise InputError(f"missing required column(s) {', '.join(missing)}", path=path, line=1)
    if not rows:
        raise InputError("no prompts in file", path=path)
    return _validate(rows, columns, path, target, {} if lines is None else lines, policies)


def _required(columns: list[str] | dict[str, object]) -> tuple[str, ...]:
    """The required columns: a conversation (`messages`) may stand in for `prompt`."""
    return tuple(c for c in REQUIRED if c != "prompt" or "messages" not in columns)


def _decode(data: bytes, path: str | Path) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 (byte 0x{data[exc.start]:02x})", path=path, line=line) from None


def _csv_rows(text: str, path: str | Path) -> tuple[list[tuple[int, dict[str, object]]], list[str]]:
    csv.field_size_limit(MAX_ROW_CHARS)  # process-wide; the rule is margin's, not the csv default's
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise InputError("empty file", path=path) from None
    columns = [h for h in header]
    if len(set(columns)) != len(columns):
        raise InputError("duplicate column names in header", path=path, line=1)
    rows: list[tuple[int, dict[str, object]]] = []
    start = reader.line_num + 1
    try:
        for record in reader:
            if record:  # csv yields [] for a blank line
                if len(record) != len(columns):
                    raise InputError(
                        f"expected {len(columns)} fields, got {len(record)}", path=path, line=start
                    )
                if sum(map(len, record)) + len(record) - 1 > MAX_ROW_CHARS:
                    raise _row_too_long(path, start)
                rows.append((start, dict(zip(columns, record, strict=True))))
            start = reader.line_num + 1
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):
            raise _row_too_long(path, start) from None
        raise InputError(f"malformed CSV ({exc})", path=path, line=start) from None
    return rows, columns


def _jsonl_rows(text: str, path: str | Path) -> tuple[list[tuple[int, dict[str, object]]], list[str]]:
    rows: list[tuple[int, dict[str, object]]] = []
    columns: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if len(line) > MAX_ROW_CHARS:
            raise _row_too_long(path, number)
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON ({exc.msg})", path=path, line=number) from None
        if not isinstance(obj, dict):
            raise InputError("each line must be a JSON object", path=path, line=number)
        columns.update(dict.fromkeys(obj))
        rows.append((number, obj))
    # A JSONL file has no header: a required key missing from any line is reported at that line.
    for number, obj in rows:
        absent = [c for c in _required(obj) if c not in obj]
        if absent:
            raise InputError(f"missing required field(s) {', '.join(absent)}", path=path, line=number)
    return rows, list(columns) if rows else list(REQUIRED)


def _parquet_rows(data: bytes, path: str | Path) -> tuple[list[tuple[int, dict[str, object]]], list[str]]:
    import polars as pl

    try:
        frame = pl.read_parquet(io.BytesIO(data))
    except Exception as exc:  # polars raises several types for a corrupt file
        raise InputError(f"cannot read parquet ({type(exc).__name__}: {exc})", path=path) from None
    return [(i + 1, row) for i, row in enumerate(frame.iter_rows(named=True))], frame.columns


def _field(row: dict[str, object], name: str, path: str | Path, line: int) -> str:
    value = row.get(name)
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int):
        if name == "prompt" or name in REQUIRED:
            raise InputError(f"field {name!r} must be text", path=path, line=line)
        return json.dumps(value, ensure_ascii=False) if not isinstance(value, float) else repr(value)
    return str(value)


def _validate(
    rows: list[tuple[int, dict[str, object]]], columns: list[str], path: str | Path, target: Target,
    seen: dict[str, int], policies: Policies | None,
) -> tuple[Prompt, ...]:
    extra_columns = sorted(c for c in columns if c not in COLUMNS and c not in CASE_COLUMNS)
    prompts: list[Prompt] = []
    for line, row in rows:
        pid = _field(row, "id", path, line)
        label = _field(row, "label", path, line)
        if not pid.strip():
            raise InputError("empty id", path=path, line=line)
        if pid in seen:
            raise InputError(f"duplicate id {pid!r} (first at line {seen[pid]})", path=path, line=line)
        seen[pid] = line
        case = case_parts(row, _field(row, "prompt", path, line), target, path, line, policies)
        text = case.text
        if not text.strip():
            raise InputError(f"empty prompt text for id {pid!r}", path=path, line=line)
        if label not in VALID_LABELS:
            raise InputError(f"unknown label {label!r}; expected safe or unsafe", path=path, line=line)
        if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text):
            raise InputError(f"prompt {pid!r} contains a lone surrogate", path=path, line=line)
        prompts.append(
            Prompt(
                id=pid,
                text=text,
                label=label,  # type: ignore[arg-type]  # checked against VALID_LABELS above
                type=_field(row, "type", path, line),
                focus=_field(row, "focus", path, line),
                note=_field(row, "note", path, line),
                extra=tuple(sorted([*((c, _field(row, c, path, line)) for c in extra_columns),
                                    *([(POLICY_TAG, case.policy_name)] if case.policy_name else [])])),
                history=case.history, target=case.target, policy=case.policy, context=case.context,
            )
        )
    return tuple(prompts)
