"""YAML guard files, for setups that flags make awkward.

    guard: llama-guard-4            # a preset, prompted, minilm, keyword or python:FILE.py:Class
    id: lg4-local-vllm              # the name in receipts and snapshots (default: the guard's)
    backend: openai
    base_url: http://127.0.0.1:8000/v1
    api_key_env: MY_SERVER_KEY      # the variable's NAME; keys never go in files
    threshold: 0.5
    options: {excluded_category_keys: [S6]}
    backend_options: {max_concurrency: 16, timeout_s: 30}  # endpoint limits (docs/engine.md#settings)
    request_options: {grammar: 'root ::= "0" | "1"'}  # extra request fields (remote backends)
    replicas: 2
    scope: harm classifier           # what it is for, shown with its results
    caveats: [English prompts only]  # shown with its results

A `python:` guard may also give `weights` (a file or folder, or `package:NAME[/PATH]`),
`revision` and `threshold`. Every key is checked; an error names the file, the line and the
field. A relative `python:` or `weights` path is taken from the file's folder. CLI flags
override the file. `margin.guards.make.parse_guard` reads it, as it reads `--guard`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from margin.errors import InputError
from margin.guards.checks import spec_from
from margin.guards.spec import GuardSpec, as_field, is_guard_file
from margin.util.yamlfile import parse_yaml

FIELDS = set(GuardSpec.model_fields) - {"name", "served"}  # served: read from the server


def _lines(node: yaml.Node, prefix: str = "") -> dict[str, int]:
    """1-based line of every mapping key, dotted (`options.policy`)."""
    found: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = f"{prefix}{key.value}"
            found[name] = key.start_mark.line + 1
            found.update(_lines(value, name + "."))
    return found


def load_guard_file(path: str | Path, overrides: dict[str, Any]) -> GuardSpec:
    """The spec a guard file gives, `overrides` on top (`margin.guards.make.parse_guard`)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such guard file: {path}", field="--guard")
    data, node = parse_yaml(path.read_bytes(), path)
    if not isinstance(data, dict):
        raise InputError("a guard file is a mapping with at least `guard:`", path=path, line=1)
    lines = _lines(node) if node is not None else {}

    def fail(message: str, field: str) -> InputError:
        # A missing field (base_url for the openai backend) is blamed on what requires it.
        line = lines.get(field) or lines.get(field.split(".")[0]) or lines.get("backend") or lines.get("guard")
        return InputError(message, path=path, line=line, field=field)

    unknown = [k for k in data if k != "guard" and k not in FIELDS]
    if unknown:
        raise fail(f"unknown field; expected guard, {', '.join(sorted(FIELDS))}", str(unknown[0]))
    name = data.get("guard")
    if not isinstance(name, str) or not name:
        raise InputError("missing `guard:` (a preset, prompted, minilm, keyword or python:FILE.py:Class)", path=path,
                         line=lines.get("guard", 1), field="guard")
    if is_guard_file(name):
        raise fail("a guard file cannot name another guard file", "guard")
    fields = {k: v for k, v in data.items() if k != "guard"}
    try:
        return spec_from(name, {**fields, **overrides}, path.parent)
    except InputError as exc:
        message, field = as_field(exc)
        raise fail(message, field) from None
