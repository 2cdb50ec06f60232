"""Reading a user's YAML file: the data, and the node tree that knows each key's line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from margin.errors import InputError


def parse_yaml(data: bytes, path: str | Path) -> tuple[Any, yaml.Node | None]:
    """(data, node) of a UTF-8 YAML document; an InputError naming `path` (and the line) if it is not one.

    The node is None for an empty document; its marks give 0-based lines.
    """
    try:
        text = data.decode("utf-8")
        node = yaml.compose(text)
        loaded = yaml.safe_load(text)
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', exc)}", path=path,
                         line=mark.line + 1 if mark else None) from None
    return loaded, node
