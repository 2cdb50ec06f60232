"""A walk of a run and of publish: the calls that climb back up the layers at run time.

Imports point one way (tests/test_layers.py); a call can still climb, through a function handed
down. The climbs a run makes are the designed ones listed here, each with its reason; a new one
fails until it is argued for here. Publish makes none. Figures: docs/design.md, "Layers"."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.paths import REPO
from tests.support.walk import climbs, climbs_in

#: The upward calls a run makes by design (caller -> callee, "module.function").
DESIGNED = {
    # The engine pumps any searches over any guard pool; the serving layer hands it the steps.
    ("margin.engine.book.pump", "margin.serving.driver._answer"),
    ("margin.engine.book.pump", "margin.serving.driver._refill"),
    ("margin.engine.book._tell", "margin.serving.driver._record_known"),
    ("margin.engine.book._completed", "margin.serving.driver._answer"),
    ("margin.engine.book.deliver", "margin.serving.driver._record"),
    ("margin.engine.book._look_up", "margin.serving.verdict_cache.get_many"),
    ("margin.engine.book.deliver", "margin.serving.verdict_cache.put_many"),
    # ... and the guard pool's call, which the engine batches, times and retries.
    ("margin.engine.calls.call_batch", "margin.serving.guard_pool.call"),
    # The in-process engine starts and stops the guard pool the serving layer built.
    ("margin.engine.local.start", "margin.serving.guard_pool.<lambda>"),
    ("margin.engine.local.close", "margin.serving.guard_pool.close"),
    # Searches are made one at a time as the driver starts them, not all before the run.
    ("margin.serving.driver._start", "margin.runs.preparing.prepare.<genexpr>"),
    # Progress: the session tells whoever watches (the CLI's live line) of each call and result.
    ("margin.serving.session.record_call", "margin.cli.run.on_call"),
    ("margin.serving.session.record_result", "margin.cli.run.on_result"),
    ("margin.engine.local.complete", "margin.serving.session._record_batch"),
    ("margin.engine.actors._receive", "margin.serving.session._record_batch"),
    ("margin.serving.session._record_batch", "margin.cli.run.on_batch"),
}


def undesigned(found: Counter[tuple[str, str]]) -> list[str]:
    return sorted(f"{a} -> {b} ({n} calls)" for (a, b), n in found.items() if (a, b) not in DESIGNED)


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_run_climbs_back_up_only_where_designed(tmp_path, engine):
    found = climbs(["run", "--guard", "keyword", "--suite", "quick", "--limit", "8", "--engine", engine,
                    "--no-cache", "--out", str(tmp_path / "run")])
    assert not undesigned(found), "calls that climb back up the layers:\n" + "\n".join(undesigned(found))
    assert found[("margin.engine.book.deliver", "margin.serving.driver._record")] > 0  # it sees callbacks


def test_publish_never_climbs_back_up(tmp_path):
    assert not undesigned(climbs(["run", "--guard", "keyword", "--suite", "quick", "--limit", "8", "--engine",
                                  "local", "--out", str(tmp_path / "run")]))
    found = climbs(["publish", str(tmp_path / "run"), "--out", str(tmp_path / "site"), "--date", "2026-12-05"])
    assert not found, "calls that climb back up the layers in publish:\n" + "\n".join(undesigned(found))


def test_the_walk_sees_a_function_handed_down_and_called_from_below():
    """A generator made in the CLI and consumed by `margin.cost` climbs back up; one made below
    and consumed above does not. (The code is compiled as if it were in margin/cli/run.py.)"""
    from margin.cost import cost_unit_warning

    scope: dict[str, object] = {}
    exec(compile("def pairs():\n    return ((str(i), 'x' * i) for i in range(1, 9))\n",
                 str(REPO / "margin" / "cli" / "run.py"), "exec"), scope)
    found = climbs_in(lambda: cost_unit_warning(scope["pairs"]()))  # type: ignore[operator]
    assert set(found) == {("margin.cost.cost_unit_warning", "margin.cli.run.<genexpr>")}
    assert found[("margin.cost.cost_unit_warning", "margin.cli.run.<genexpr>")] == 9  # 8 items, then the end
    assert not climbs_in(lambda: cost_unit_warning([("a", "x")]))
