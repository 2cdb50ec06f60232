"""Reading a user's YAML file: the data, and the node tree that knows each key's line.

Every YAML margin reads goes through `parse_yaml`. Aliases (`*name`) are bounded before anything
is expanded: a few hundred bytes of nested aliases (a "billion laughs") share nodes cheaply but
expand to gigabytes once validated, hashed or written out. A document may hold at most
MAX_ALIASES aliases and MAX_NODES nodes counted with every alias written out; anything larger is
refused naming the file and the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from margin.errors import InputError

MAX_ALIASES = 100
MAX_NODES = 100_000


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts aliases as it composes and stops past MAX_ALIASES."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise yaml.composer.ComposerError(
                    None, None, f"more than {MAX_ALIASES} YAML aliases (*name); write the values out",
                    self.peek_event().start_mark,
                )
        return super().compose_node(parent, index)


def _check_expansion(node: yaml.Node) -> None:
    """Refuse a tree that, with each alias written out, has more than MAX_NODES nodes."""
    sizes: dict[int, int] = {}

    def size(current: yaml.Node) -> int:
        if id(current) in sizes:
            return sizes[id(current)]
        sizes[id(current)] = 1  # a recursive alias counts once; the constructor handles the cycle
        if isinstance(current, yaml.MappingNode):
            total = 1 + sum(size(key) + size(value) for key, value in current.value)
        elif isinstance(current, yaml.SequenceNode):
            total = 1 + sum(size(item) for item in current.value)
        else:
            total = 1
        if total > MAX_NODES:
            raise yaml.composer.ComposerError(
                None, None, f"its aliases expand to more than {MAX_NODES:,} YAML nodes; write the values out",
                current.start_mark,
            )
        sizes[id(current)] = total
        return total

    size(node)


def parse_yaml(data: bytes | str, path: str | Path) -> tuple[Any, yaml.Node | None]:
    """(data, node) of a UTF-8 YAML document; an InputError naming `path` (and the line) if it is not one.

    The node is None for an empty document; its marks give 0-based lines.
    """
    try:
        text = data if isinstance(data, str) else data.decode("utf-8")
        loader = _BoundedLoader(text)
        try:
            node = loader.get_single_node()
            if node is not None and loader.aliases:
                _check_expansion(node)
            loaded = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', exc)}", path=path,
                         line=mark.line + 1 if mark else None) from None
    return loaded, node
