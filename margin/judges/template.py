"""Judge templates: YAML files with a system and a user message holding four placeholders.

    name: behaviour
    version: 1
    format: margin-judge-json/1     # the parse rule the template asks the judge to follow
    system: |                       # optional
      ...
    user: |
      ... {{original_prompt}} ... {{original_response}} ...
      ... {{transformed_prompt}} ... {{transformed_response}} ...

Every placeholder must appear (the judge must see all four texts) and no other `{{name}}`
may. Substitution is one pass, so a response that itself contains `{{original_prompt}}` is
shown as written, never expanded. A built-in template is named without a path (`behaviour`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from margin.errors import InputError
from margin.judges.parse import FORMAT
from margin.judges.verdicts import JudgeCase, Messages
from margin.util.hashing import sha256_bytes
from margin.util.suggest import did_you_mean
from margin.util.yamlfile import parse_yaml

PLACEHOLDERS = ("original_prompt", "original_response", "transformed_prompt", "transformed_response")
SLOT = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
FORMATS = (FORMAT,)
FIELDS = ("name", "version", "format", "system", "user")


@dataclass(frozen=True)
class JudgeTemplate:
    name: str
    version: int
    format: str
    system: str | None
    user: str
    source: str
    sha256: str  # of the file's bytes: the template's identity

    def render(self, case: JudgeCase) -> Messages:
        values = {
            "original_prompt": case.original_prompt,
            "original_response": case.original_response,
            "transformed_prompt": case.transformed_prompt,
            "transformed_response": case.transformed_response,
        }

        def fill(text: str) -> str:
            return SLOT.sub(lambda m: values[m.group(1)], text)

        messages = [{"role": "system", "content": fill(self.system)}] if self.system else []
        return [*messages, {"role": "user", "content": fill(self.user)}]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "format": self.format,
                "source": self.source, "sha256": self.sha256}


def builtin_templates() -> list[str]:
    folder = resources.files("margin").joinpath("judges", "templates")
    return sorted(e.name[: -len(".yaml")] for e in folder.iterdir() if e.name.endswith(".yaml"))


def load_template(spec: str | Path, *, base: Path | None = None) -> JudgeTemplate:
    """A built-in name, or a path (relative paths are taken from `base`, the config's folder)."""
    text_spec = str(spec)
    if text_spec in builtin_templates():
        data = resources.files("margin").joinpath("judges", "templates", f"{text_spec}.yaml").read_bytes()
        return parse_template(data, f"margin/judges/templates/{text_spec}.yaml")
    path = Path(text_spec)
    if not path.is_absolute() and base is not None:
        path = base / path
    if not path.is_file():
        raise InputError(f"no such judge template (built-in: {', '.join(builtin_templates())})"
                         f"{did_you_mean(text_spec, builtin_templates())}", path=path)
    return parse_template(path.read_bytes(), str(path))


def parse_template(data: bytes, source: str) -> JudgeTemplate:
    spec, node = parse_yaml(data, source)
    if not isinstance(spec, dict):
        raise InputError("a judge template is a mapping with `name`, `format` and `user`", path=source, line=1)
    lines = {key.value: key.start_mark.line + 1 for key, _ in node.value} if isinstance(node, yaml.MappingNode) else {}

    def fail(message: str, field: str) -> InputError:
        return InputError(message, path=source, line=lines.get(field, 1), field=field)

    for key in spec:
        if key not in FIELDS:
            raise fail(f"unknown field; expected {', '.join(FIELDS)}", str(key))
    for key in ("name", "format", "user"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise fail("required: a non-empty string", key)
    if spec["format"] not in FORMATS:
        raise fail(f"unknown format {spec['format']!r}; expected {', '.join(FORMATS)}", "format")
    system = spec.get("system")
    if system is not None and not isinstance(system, str):
        raise fail("must be a string", "system")
    version = spec.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool):
        raise fail("must be an integer", "version")
    found: set[str] = set()
    for key in ("system", "user"):
        for match in SLOT.finditer(spec.get(key) or ""):
            if match.group(1) not in PLACEHOLDERS:
                raise fail(f"unknown placeholder {{{{{match.group(1)}}}}}; expected "
                           f"{', '.join('{{' + p + '}}' for p in PLACEHOLDERS)}", key)
            found.add(match.group(1))
    absent = [p for p in PLACEHOLDERS if p not in found]
    if absent:
        raise fail(f"the judge must see every text: missing {', '.join('{{' + p + '}}' for p in absent)}", "user")
    return JudgeTemplate(spec["name"], version, spec["format"], system, spec["user"], source, sha256_bytes(data))
