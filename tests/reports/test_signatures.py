"""A ceiling on untyped documents in public signatures: the public functions and methods of
margin/reports, margin/studies and margin/site that take or return `dict[str, Any]` or
`Mapping[str, Any]`.

Report documents are typed models read by attribute (the snapshot, its records and coverage,
the pairings); a new public function that hands a document on as a bare dict raises the count
and fails here. Lower the ceiling when a change types more of them."""

from __future__ import annotations

import ast

from tests.support.paths import REPO

UNTYPED = ("dict[str, Any]", "Mapping[str, Any]")
# issue 36 found 94 and 22 (26 once studies grew stacks); the site read snapshots as dicts in 8;
# typed pair coverage and study documents took reports from 69 to 55 and studies from 26 to 9; the
# typed diff, check, ablation, analyses, tables, snapshot blocks and receipts' call lines to 16;
# the pairings page reading the Pairings model took the site from 3 to 0
CEILING = {"reports": 16, "studies": 9, "site": 0}


def untyped_in(source: str) -> list[tuple[int, str]]:
    """(line, name) of each public function in `source` with a bare dict in its signature."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_"):
            args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            annotations = [a.annotation for a in args if a.annotation] + ([node.returns] if node.returns else [])
            if any(kind in ast.unparse(a) for a in annotations for kind in UNTYPED):
                found.append((node.lineno, node.name))
    return found


def untyped(package: str) -> list[str]:
    return [f"{path.relative_to(REPO)}:{line} {name}" for path in sorted((REPO / "margin" / package).rglob("*.py"))
            for line, name in untyped_in(path.read_text("utf-8"))]


def test_public_signatures_hand_on_no_more_bare_dicts_than_the_ceiling():
    for package, ceiling in CEILING.items():
        found = untyped(package)
        assert len(found) <= ceiling, f"{len(found)} > {ceiling} in margin/{package}:\n" + "\n".join(found)


def test_the_count_sees_a_bare_dict_taken_or_returned_by_a_public_function_or_method():
    source = ("def f(a: Mapping[str, Any]) -> int: ...\n"
              "def g() -> dict[str, Any]: ...\n"
              "def _h(a: dict[str, Any]): ...\n"
              "def k(a: dict[str, int]): ...\n"
              "class C:\n    def m(self, *, b: dict[str, Any] | None = None): ...\n")
    assert [name for _, name in untyped_in(source)] == ["f", "g", "m"]
