"""The layout's contract: dependencies point one way, between layers and between modules.

Layers, lowest first; a module may import its own layer's units and the layers below, never
one above. Within and across packages, no module imports itself back through others (no
cycle). Imports are read from the source (module level and inside functions alike).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.support.paths import REPO

PACKAGE = REPO / "margin"
LAYERS = [
    {"margin.types", "margin.errors", "margin.util"},
    {"margin.engine", "margin.datasets", "margin.cost", "margin.runfolder", "margin.runrecord"},
    {"margin.transforms", "margin.backends", "margin.reports"},
    {"margin.guards", "margin.judges", "margin.site"},
    {"margin.search"},
    {"margin.serving"},
    {"margin.runs"},
    {"margin.studies"},
    {"margin.api", "margin.cli", "margin", "margin.__main__"},
]
#: The phases of a run, in the order they may import each other: preparing decides a run and
#: writes nothing; recording writes outputs from results (run, merge, rescore); executing
#: searches and hands its results to recording. `margin/runs/`'s own modules (ablate) sit on top.
RUN_PHASES = ["margin.runs.preparing", "margin.runs.recording", "margin.runs.executing"]
SUBPACKAGES = {"util", "engine", "datasets", "transforms", "backends", "reports", "guards", "judges", "site", "search", "serving",
               "runs", "studies", "cli"}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def unit(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 and (parts[1] in SUBPACKAGES or len(parts) == 2) else module


def imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    for path in PACKAGE.rglob("*.py"):
        me = module_name(path)
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("margin"):
                # `from pkg import module` imports the module; `from module import name`, the module
                named = [f"{node.module}.{a.name}" for a in node.names]
                targets = [t for t in named if t in modules] or [node.module]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("margin")]
            else:
                continue
            graph[me] |= {t for t in targets if t in modules and t != me}
    return graph


def level(name: str) -> int:
    for index, layer in enumerate(LAYERS):
        if unit(name) in layer:
            return index
    raise AssertionError(f"{name} is in no layer: add its folder to LAYERS")


def test_every_import_points_down_or_sideways():
    upward = sorted(f"{a} -> {b}" for a, targets in imports().items() for b in targets
                    if a != "margin" and level(b) > level(a))  # the package root re-exports the API
    assert not upward, "imports that point up a layer:\n" + "\n".join(upward)


def phase(name: str) -> int:
    """A module of `margin/runs/`: its phase's place in RUN_PHASES (its own modules above them)."""
    parts = name.split(".")
    return RUN_PHASES.index(".".join(parts[:3])) if ".".join(parts[:3]) in RUN_PHASES else len(RUN_PHASES)


def upward_in_runs(graph: dict[str, set[str]]) -> list[str]:
    inside = {a: {b for b in targets if unit(b) == "margin.runs"} for a, targets in graph.items() if unit(a) == "margin.runs"}
    return sorted(f"{a} -> {b}" for a, targets in inside.items() for b in targets if phase(b) > phase(a))


def test_run_phases_point_one_way():
    upward = upward_in_runs(imports())
    assert not upward, "imports that point up a phase of margin/runs/:\n" + "\n".join(upward)


def test_a_phase_import_back_up_is_caught():
    graph = {"margin.runs.preparing.config": {"margin.runs.executing.single", "margin.runs.preparing.subset"},
             "margin.runs.executing.single": {"margin.runs.recording.outputs", "margin.runs.preparing.config"},
             "margin.runs.recording.outputs": {"margin.runs.ablate"}}
    assert upward_in_runs(graph) == ["margin.runs.preparing.config -> margin.runs.executing.single",
                                     "margin.runs.recording.outputs -> margin.runs.ablate"]


def test_no_import_cycles():
    graph = imports()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for other in sorted(graph.get(node, ())):
            if other == "margin" or other.startswith("margin.cli"):
                continue
            if state.get(other) == 1:
                cycles.append(path[path.index(other):] + [other] if other in path else [node, other])
            elif not state.get(other):
                visit(other, [*path, other])
        state[node] = 2

    for start in sorted(graph):
        if not state.get(start):
            visit(start, [start])
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_layout_stays_small():
    top = [p.name for p in PACKAGE.glob("*.py")]
    assert len(top) <= 12, f"modules directly in margin/: {sorted(top)}"
    long = sorted(f"{p.relative_to(REPO)}: {n}" for p in PACKAGE.rglob("*.py")
                  if (n := p.read_text("utf-8").count("\n")) > 400)
    assert not long, "modules over 400 lines:\n" + "\n".join(long)
