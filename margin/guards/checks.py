"""A guard name with its fields, accepted as a spec or refused, by its kind's row in
`margin.guards.kinds` (the settings it takes, its own checks, where its paths are taken from).

`margin.guards.make.parse_guard` is the one way in (for `--guard` and its flags, a guard file,
a study config's guard entry); `with_overrides` checks the API's overrides here too. Errors
name the CLI flag (`margin.guards.spec.as_field` gives a guard file's key).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.guards.kinds import BACKEND_SETTINGS, SETTINGS, GuardKind, kind_of
from margin.guards.spec import BUILTIN, FLAGS, GuardSpec, pinned, validated_spec


def spec_from(name: str, fields: dict[str, Any], folder: Path | None = None) -> GuardSpec:
    """A guard name (not a guard file) with its fields, checked. Relative `python:` and
    `weights` paths (and a local GGUF model's) are taken from `folder` (the file's folder;
    None: the working directory); `model: REPO@REV` pins a revision."""
    kind = _kind(name)
    if "served" in fields:  # read from the server at start, never given
        raise InputError("unknown field: margin reads what a server serves from it at start", field="served")
    if kind.place is not None:
        name, fields = kind.place(name, fields, folder)
    return check(validated_spec(name=name, **pinned(fields)))


def check(spec: GuardSpec) -> GuardSpec:
    """Reject settings a guard cannot use, before anything runs (describe builds no model):
    first a setting its kind does not take, then the kind's own checks."""
    kind = _kind(spec.name)
    for setting in SETTINGS:
        value = getattr(spec, setting)
        given = bool(value) if isinstance(value, dict) else value is not None
        if given and setting not in kind.accepts:
            raise _refused(kind, spec, setting)
    if kind.check is not None:
        kind.check(spec)
    return spec


def _kind(name: str) -> GuardKind:
    kind = kind_of(name)
    if kind is None:
        from margin.util.suggest import did_you_mean

        raise InputError(f"unknown guard {name!r}{did_you_mean(name, BUILTIN)} (see `margin guards list`)",
                         field="--guard")
    return kind


def _refused(kind: GuardKind, spec: GuardSpec, setting: str) -> InputError:
    flag = FLAGS.get(setting, setting)  # option dicts are named as given, so a guard file's line is found
    if setting in kind.refusals:
        return InputError(kind.refusals[setting].format(name=spec.name), field=flag)
    why = " (it calls no backend)" if setting in BACKEND_SETTINGS and "backend" not in kind.accepts else ""
    return InputError(f"the {kind.name} guard takes no {flag}{why}", field=flag)
