"""What publish, its plots and the ablation figure read, read as typed values: a run's own
snapshot provenance, each guard's `Effect`s, an ablation defence's row (`DefenceRecord`)."""

from __future__ import annotations

import datetime as dt
import json

from margin.reports.ablation import DefenceRecord
from margin.reports.effectiveness import ClassEffect, Effect
from margin.reports.plots import ablation_figure
from margin.reports.publish import effectiveness_grid, publish, run_provenance
from margin.runfolder import load_run
from tests.support.guards import HashGuard
from tests.support.runs import make_run

DAY = dt.date(2026, 9, 30)


def test_the_leaderboard_takes_version_and_commit_from_each_runs_own_snapshot(tmp_path):
    run = make_run(tmp_path / "hash", HashGuard(0.5, salt="p"))
    own = json.loads((run / "snapshot.json").read_text())
    own["meta"]["provenance"].update(margin_version="9.9.9", git_commit="feedbeef")
    (run / "snapshot.json").write_text(json.dumps(own))
    assert run_provenance(load_run(run)).git_commit == "feedbeef"
    evaluation = publish([run], tmp_path / "a", date=DAY, plots=False).leaderboard.data[0].evaluation
    assert (evaluation.margin_version, evaluation.git_commit) == ("9.9.9", "feedbeef")
    assert list(evaluation.document())[-4:] == ["search", "seed", "margin_version", "git_commit"]

    (run / "snapshot.json").unlink()  # no snapshot of its own: the record says nothing of either
    assert run_provenance(load_run(run)) is None
    evaluation = publish([run], tmp_path / "b", date=DAY, plots=False).leaderboard.data[0].evaluation
    assert not {"margin_version", "git_commit"} & set(evaluation.document())

    (run / "snapshot.json").write_text("{torn")  # unreadable: the same
    assert run_provenance(load_run(run)) is None


def effect(name: str, unsafe: tuple[int, int], safe: tuple[int, int]) -> Effect:
    return Effect(name, {"unsafe": ClassEffect(*unsafe, None), "safe": ClassEffect(*safe, None)})


def test_the_effectiveness_grid_reads_each_guards_effects():
    rows, columns, values = effectiveness_grid({
        "kw": [effect("zwsp", (4, 1), (2, 2)), effect("b64", (4, 4), (0, 0))],
        "mini": [effect("zwsp", (5, 0), (5, 5))],
    })
    assert rows == ["b64", "zwsp"]  # every transform any guard met, by name
    assert columns == ["kw · unsafe", "kw · safe", "mini · unsafe", "mini · safe"]
    assert values == [[1.0, None, None, None],  # no eligible safe prompt: no rate; mini never met b64
                      [0.25, 1.0, 0.0, 1.0]]


def defence(name: str, figures: dict, change: dict | None, effectiveness: dict | None = None) -> DefenceRecord:
    """An ablation.json defence row with what these tests do not read filled in."""
    return DefenceRecord.model_validate({
        "defence": name, "normalize": None if name == "none" else name, "guard_id": "g", "run": name,
        "figures": figures, "coverage": {"scored": {}, "missing": {}}, "guard_calls": 7, "decoded_calls": 0,
        "total_calls": 7, "change": change, "clean": None, "cheapest_flips": {}, "effectiveness": effectiveness})


def test_an_ablation_defence_gives_each_figure_and_its_change_against_none():
    base = defence("none", {"balanced_margin": {"value": 10, "interval": [8, 12.5]}}, None)
    defended = defence("skeleton", {"balanced_margin": {"value": 14.5, "interval": None}},
                       {"balanced_margin": {"difference": 4.5, "interval": [1.0, 6.0], "moves": True},
                        "safe_margin": None})
    assert base.point("balanced_margin", change=False) == (10, [8, 12.5])
    assert base.point("balanced_margin", change=True) == (0.0, None)  # none against itself
    assert defended.point("balanced_margin", change=False) == (14.5, None)
    assert defended.point("balanced_margin", change=True) == (4.5, [1.0, 6.0])
    assert defended.point("safe_margin", change=True) == (None, None)  # no paired change: not drawn
    assert base.document()["guard_calls"] == 7 and base.point("balanced_margin", change=False)[0] == 10


def test_an_exhaustive_defence_gives_each_familys_flip_rate_over_both_classes():
    def rate(flipped: int, eligible: int) -> dict:
        return {"eligible": eligible, "flipped": flipped, "flip_rate": flipped / eligible if eligible else None}

    row = {"name": "invisible", "unsafe": rate(1, 2), "safe": rate(0, 2), "all": rate(1, 4),
           "baseline_flip_rate": 0.75, "status": "open"}
    exhaustive = defence("skeleton", {}, None, {"families": [row, {**row, "name": "wrappers", "all": rate(0, 0)}],
                                                "transforms": []})
    assert exhaustive.family_flip_rates() == {"invisible": 0.25, "wrappers": None}
    cheapest = defence("none", {}, None)
    assert cheapest.family_flip_rates() is None


def test_the_ablation_figure_draws_each_defence_from_its_model():
    figures = {name: {"value": 10.0, "interval": [9.0, 11.0]}
               for name in ("balanced_margin", "unsafe_margin", "safe_margin", "clean_balanced_accuracy")}
    defences = [defence(d, figures, change)
                for d, change in (("none", None), ("nfkc", {"balanced_margin": {"difference": 2.0, "interval": [1.0, 3.0],
                                                                                 "moves": True}}))]
    fig = ablation_figure(defences)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["none", "nfkc"]
    changes = fig.axes[1].containers[0]  # the balanced margin's change: 0 for none, 2 for nfkc
    assert [y for _, y in changes.lines[0].get_xydata()] == [0.0, 2.0]
