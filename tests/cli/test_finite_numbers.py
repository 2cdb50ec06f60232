"""Numbers are finite: a NaN or infinite budget, threshold or gate is refused in one line
(exit 2) naming its flag or field; the snapshot model refuses NaN, infinities and wrong types,
so `margin check` and `margin diff` refuse such a snapshot naming the file and the field
instead of passing it or crashing; a run.json with a NaN budget is refused the same way."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest

import margin as api
from margin.errors import InputError
from margin.reports.pairings import validate_pairings
from margin.reports.snapshot_schema import validate_snapshot
from margin.studies.config import StudyThresholds
from tests.reports.test_publish import pairings_fixture
from tests.support.cli import margin


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("finite") / "run"
    api.run("keyword", suite="quick", limit=6, engine="local", cache=False, out=out)
    return out


def one_error(proc, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert all(n in lines[0] for n in needles), lines[0]
    return lines[0]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_budget_that_is_not_finite_is_refused_before_anything_is_written(tmp_path, value):
    out = tmp_path / "out"
    proc = margin("run", "--guard", "keyword", "--suite", "quick", "--limit", "4", "--engine", "local",
                  "--budget", value, "--out", str(out))
    one_error(proc, "--budget", "finite")
    assert not out.exists()


@pytest.mark.parametrize("flag", ["--call-timeout", "--requests-per-second", "--hedge-after"])
def test_call_limits_that_are_not_finite_are_refused(tmp_path, flag):
    proc = margin("run", "--guard", "keyword", "--limit", "4", flag, "nan", "--out", str(tmp_path / "out"))
    one_error(proc, flag)


@pytest.mark.parametrize("value", [".nan", ".inf"])
def test_a_guard_file_threshold_that_is_not_finite_is_refused(tmp_path, value):
    guard = tmp_path / "g.yaml"
    guard.write_text(f"guard: minilm\nthreshold: {value}\n")
    proc = margin("run", "--guard", str(guard), "--limit", "4", "--out", str(tmp_path / "out"))
    one_error(proc, "threshold")


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_study_thresholds_must_be_finite(value):
    with pytest.raises(ValueError):
        StudyThresholds(evasion=value)


@pytest.mark.parametrize(("flag", "value"), [("--max-drop", "nan"), ("--max-drop", "inf"), ("--min-balanced", "nan"),
                                             ("--min-balanced", "inf")])
def test_check_gates_must_be_finite(run, flag, value):
    proc = margin("check", str(run), "--baseline", str(run), flag, value)
    one_error(proc, flag, "finite")


SPOILS = {
    "a NaN margin": ("data.0.balanced_margin", lambda s: s["data"][0].update(balanced_margin=math.nan)),
    "an infinite interval": ("data.0.confidence_intervals.unsafe_margin.1",
                             lambda s: s["data"][0]["confidence_intervals"].update(unsafe_margin=[0.0, math.inf])),
    "a string margin": ("data.0.safe_margin", lambda s: s["data"][0].update(safe_margin="12.5")),
    "a bool accuracy": ("data.0.clean_balanced_accuracy",
                        lambda s: s["data"][0].update(clean_balanced_accuracy=True)),
    "a numeric id": ("data.0.id", lambda s: s["data"][0].update(id=7)),
    "a NaN budget": ("meta.provenance.budget", lambda s: s["meta"]["provenance"].update(budget=math.nan)),
    "a NaN curve point": ("data.0.curves.safe.0", lambda s: s["data"][0]["curves"]["safe"].__setitem__(0, math.nan)),
}


@pytest.mark.parametrize("spoil", SPOILS, ids=list(SPOILS))
def test_the_snapshot_model_refuses_non_finite_numbers_and_wrong_types(run, spoil):
    field, change = SPOILS[spoil]
    snapshot = json.loads((run / "snapshot.json").read_text())
    validate_snapshot(copy.deepcopy(snapshot), "snapshot.json")  # the run's own snapshot is fine
    change(snapshot)
    with pytest.raises(InputError) as caught:
        validate_snapshot(snapshot, "snapshot.json")
    assert caught.value.field == field


@pytest.mark.parametrize("spoil", ["a NaN margin", "a string margin", "a numeric id", "an infinite interval"])
def test_check_and_diff_refuse_such_a_snapshot_naming_file_and_field(run, tmp_path, spoil):
    field, change = SPOILS[spoil]
    snapshot = json.loads((run / "snapshot.json").read_text())
    change(snapshot)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(snapshot))  # json writes NaN and Infinity, as a careless tool would
    good = str(run / "snapshot.json")
    one_error(margin("check", str(bad), "--baseline", good, "--min-balanced", "0"), str(bad), field)
    one_error(margin("check", good, "--baseline", str(bad)), str(bad), field)
    one_error(margin("diff", good, str(bad)), str(bad), field)


def copy_run(run: Path, folder: Path) -> Path:
    folder.mkdir()
    for path in run.iterdir():
        if path.is_file():
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


def test_a_run_record_with_a_nan_budget_is_refused(run, tmp_path):
    folder = copy_run(run, tmp_path / "run")
    record = json.loads((folder / "run.json").read_text())
    record["budget"] = math.nan
    (folder / "run.json").write_text(json.dumps(record))
    one_error(margin("report", str(folder)), "run.json", "budget", "finite")


def test_a_nan_flip_cost_in_results_is_refused_by_report_and_publish_before_anything_is_written(run, tmp_path):
    folder = copy_run(run, tmp_path / "run")
    lines = (folder / "results.jsonl").read_text().splitlines()
    first = json.loads(lines[1])
    first["flip_cost"] = math.inf
    lines[1] = json.dumps(first)
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    one_error(margin("report", str(folder)), "results.jsonl:2", "flip_cost", "finite")
    one_error(margin("publish", str(folder), "--out", str(tmp_path / "pub")), "results.jsonl:2", "flip_cost")
    assert not (tmp_path / "pub").exists()


def test_a_pairings_snapshot_with_a_nan_figure_is_refused():
    pairings = pairings_fixture()
    validate_pairings(copy.deepcopy(pairings), "pairings.json")
    pairings["data"][0]["transformations"][0]["evasion"] = math.nan
    with pytest.raises(InputError):
        validate_pairings(pairings, "pairings.json")
