"""YAML guard files, for setups that flags make awkward.

    guard: llama-guard-4            # a preset, minilm, keyword or python:FILE.py:Class
    id: lg4-local-vllm              # optional name in receipts and snapshots
    backend: openai
    base_url: http://127.0.0.1:8000/v1
    api_key_env: MY_SERVER_KEY      # the variable's NAME; keys never go in files
    threshold: 0.5
    options: {excluded_category_keys: [S6]}
    backend_options: {concurrency: 16, timeout_s: 30}
    replicas: 2

Every key is checked; an error names the file, the line and the field. A relative
`python:` path is taken from the file's folder. CLI flags override the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from margin.errors import InputError
from margin.guards.spec import GuardSpec, check
from margin.util.yamlfile import parse_yaml

FIELDS = set(GuardSpec.model_fields) - {"name"}


def _lines(node: yaml.Node, prefix: str = "") -> dict[str, int]:
    """1-based line of every mapping key, dotted (`options.policy`)."""
    found: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = f"{prefix}{key.value}"
            found[name] = key.start_mark.line + 1
            found.update(_lines(value, name + "."))
    return found


def load_guard_file(path_text: str, overrides: dict[str, Any]) -> GuardSpec:
    path = Path(path_text)
    if not path.is_file():
        raise InputError("no such guard file", path=path, field="--guard")
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
        raise InputError("missing `guard:` (a preset, minilm, keyword or python:FILE.py:Class)", path=path,
                         line=lines.get("guard", 1), field="guard")
    if name.endswith((".yaml", ".yml")):
        raise fail("a guard file cannot name another guard file", "guard")
    if name.startswith("python:"):
        file, sep, cls = name[len("python:"):].rpartition(":")
        if sep and file and not Path(file).is_absolute():
            name = f"python:{path.parent / file}:{cls}"
    fields = {k: v for k, v in data.items() if k != "guard"}
    fields.update(overrides)
    if isinstance(fields.get("model"), str) and "@" in fields["model"] and "revision" not in data:
        fields["model"], fields["revision"] = fields["model"].rsplit("@", 1)
    try:
        spec = GuardSpec(name=name, **fields)
    except Exception as exc:  # pydantic's ValidationError: name the first bad field
        errors = getattr(exc, "errors", None)
        if not callable(errors):
            raise
        first = errors()[0]
        raise fail(first["msg"], ".".join(str(x) for x in first["loc"])) from None
    from margin.guards.kinds import kind_of
    from margin.guards.spec import PRESETS
    from margin.util.suggest import did_you_mean

    if kind_of(name) is None:
        raise fail(f"unknown guard {name!r}{did_you_mean(name, PRESETS)}", "guard")
    try:
        return check(spec)
    except InputError as exc:
        field = exc.field or "guard"
        field = {"--backend": "backend", "--base-url": "base_url", "--api-key-env": "api_key_env",
                 "--threshold": "threshold", "--model": "model"}.get(field, field)
        raise fail(exc.message, field) from None
