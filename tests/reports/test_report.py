from __future__ import annotations

import json

from rich.console import Console

from margin.reports.snapshot_schema import FigureSet, Record
from margin.reports.tables import flips_table, margins_table, slices_table, with_ci
from margin.types import Flip, SearchResult
from tests.support.cli import margin
from tests.support.guards import ProbabilityGuard
from tests.support.runs import make_run


def render(table) -> str:
    console = Console(width=200, record=True)
    console.print(table)
    return console.export_text()


def test_with_ci_formats_value_and_interval():
    assert with_ci(38.7, [35.123, 42.0]) == "38.70 [35.12, 42.00]"
    assert with_ci(None, [1, 2]) == "—"
    assert with_ci(1.0, None) == "1.00"


def test_tables_show_intervals_slices_and_visible_flips():
    record = {"id": "g", "rank": 1, "balanced_margin": 20.0, "unsafe_margin": 10.0, "safe_margin": 30.0,
              "clean_balanced_accuracy": 75.0, "clean_accuracy": {"unsafe": 50.0, "safe": 100.0},
              "confidence_intervals": {"balanced_margin": [15.0, 25.0]},
              "coverage": {"scored": {"unsafe": 2, "safe": 2}, "missing": {"unsafe": 1, "safe": 0}},
              "evaluation": {}, "curves": {"budgets": [0.0]}}
    text = render(margins_table(Record.model_validate(record)))
    assert "20.00 [15.00, 25.00]" in text and "2 / 2" in text and "1 / 0" in text
    text = render(slices_table("type", {"homonyms": FigureSet.model_validate({**record, "balanced_margin": None})}))
    assert "homonyms" in text and "2/2" in text
    flip = Flip("zero-width-space", "1", 0, 1.98, "safe", "k\u200bill")
    results = [SearchResult("u1", "unsafe", "t", "unsafe", 1.98, False, flip, 3)]
    text = render(flips_table(results))
    assert "k<U+200B>ill" in text and "zero-width-space (1)" in text


def test_report_cli_on_an_exhaustive_run(tmp_path):
    run = make_run(tmp_path / "run", ProbabilityGuard(), search="exhaustive")
    proc = margin("report", str(run))
    assert proc.returncode == 0, proc.stderr
    proc_text = " ".join(proc.stdout.split())
    for expected in ("value [95% CI]", "slices by type", "coverage", "cheapest flips", "invariance per transform",
                     "effectiveness per family", "threshold sweep", "average precision"):
        assert expected in proc.stdout, expected
    proc = margin("report", str(run), "--json")
    payload = json.loads(proc.stdout)
    assert set(payload) == {"guard", "coverage", "outcomes", "cheapest_flips", "invariance", "effectiveness",
                            "sweep"}
    results = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    outcomes = payload["outcomes"]  # per class; the flips table's title counts the same
    assert sum(sum(o.values()) for o in outcomes.values()) == len(results)
    for label, o in outcomes.items():
        mine = [r for r in results if r["label"] == label]
        assert o["wrong_on_original"] == sum(1 for r in mine if r["flip_cost"] == 0)
        assert o["flipped"] == sum(1 for r in mine if r["flip"]) and o["missing"] == 0
    assert (f"cheapest flips ({sum(o['flipped'] for o in outcomes.values())} flipped by a transform, "
            f"{sum(o['wrong_on_original'] for o in outcomes.values())} wrong on the original)") in proc_text
    flipped = sorted((r["flip"]["cost"], r["prompt_id"]) for r in results if r["flip"])
    assert [(f["cost"], f["prompt_id"]) for f in payload["cheapest_flips"]] == flipped[:10]  # the text report's list
    prompts = payload["coverage"]["prompts"]
    assert sum(p["attempted"] for p in prompts.values()) == len(results)
    assert payload["coverage"]["candidates"]["attempted"] > len(results)
    snapshot = json.loads((run / "snapshot.json").read_text())["data"][0]
    assert payload["guard"]["confidence_intervals"] == snapshot["confidence_intervals"]
    assert margin("report", str(tmp_path / "nowhere")).returncode == 2
