"""Issue 36, item 8: one name, one meaning. No class name is defined twice in margin/, so a
name read anywhere (a type in a signature, an import, a traceback) means one thing."""

from __future__ import annotations

import ast
from collections import defaultdict

from tests.support.paths import REPO


def test_no_class_name_is_defined_twice_in_margin():
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted((REPO / "margin").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ClassDef):
                where[node.name].append(f"{path.relative_to(REPO)}:{node.lineno}")
    twice = {name: places for name, places in where.items() if len(places) > 1}
    assert not twice, "class names defined more than once:\n" + "\n".join(
        f"{name}: {', '.join(places)}" for name, places in sorted(twice.items()))
