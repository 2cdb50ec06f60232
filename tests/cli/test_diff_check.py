"""`margin diff` and `margin check` as a user runs them, on keyword runs of the bundled sample
(quick suite): plain, and behind every defence (`--normalize all`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import margin
from margin.reports.bootstrap import paired_differences
from margin.runfolder import load_run
from tests.support.cli import margin as cli
from tests.support.shared_runs import keyword_xstest_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("runs")
    out = {}
    for name, normalize in (("plain", None), ("hardened", "all")):
        margin.run("keyword", suite="quick", normalize=normalize, engine="local", cache=False, out=root / name)
        out[name] = root / name
    margin.run("keyword", suite="standard", engine="local", cache=False, limit=8, out=root / "standard")
    out["standard"] = root / "standard"
    return out


def test_diff_json_gives_both_sides_and_the_paired_change(runs):
    done = cli("diff", str(runs["plain"]), str(runs["hardened"]), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    plain, hardened = load_run(runs["plain"]), load_run(runs["hardened"])
    expected = paired_differences(plain.results, hardened.results, 100.0)["balanced_margin"]
    row = document["figures"]["balanced_margin"]
    assert expected is not None and row["difference"] == pytest.approx(expected.value)
    assert row["interval"] == pytest.approx(expected.interval.as_list())
    assert row["a"]["interval"] and row["b"]["interval"]
    assert document["b"]["guard_id"] == "keyword+nfkc+strip-format+strip-marks+skeleton+decode"
    unsafe = {r["family"]: r for r in document["families"]["unsafe"]}
    assert unsafe["homoglyph"]["a"] > 0 and unsafe["homoglyph"]["b"] == 0  # skeleton closes homoglyphs
    assert document["slices"]["type"] and document["prompts"]["compared"] == 48


def test_diff_prints_tables(runs):
    done = cli("diff", str(runs["plain"]), str(runs["hardened"]))
    assert done.returncode == 0, done.stderr
    assert "B − A" in done.stdout and "newly robust" in done.stdout and "homoglyph" in done.stdout


def test_check_fails_the_plain_run_against_the_hardened_baseline_and_passes_the_reverse(runs):
    worse = cli("check", str(runs["plain"]), "--baseline", str(runs["hardened"]))
    assert worse.returncode == 1, worse.stdout + worse.stderr
    assert "FAIL balanced_margin" in worse.stdout and worse.stdout.rstrip().endswith("FAILED: balanced_margin")
    better = cli("check", str(runs["hardened"]), "--baseline", str(runs["plain"]), "--per-class")
    assert better.returncode == 0, better.stdout + better.stderr
    assert better.stdout.rstrip().endswith("PASSED: no gated figure dropped significantly")


def test_check_tolerance_floor_and_snapshot_baseline(runs):
    tolerated = cli("check", str(runs["plain"]), "--baseline", str(runs["hardened"]), "--max-drop", "20")
    assert tolerated.returncode == 0, tolerated.stdout
    floor = cli("check", str(runs["hardened"]), "--baseline", str(runs["plain"]), "--min-balanced", "90")
    assert floor.returncode == 1 and "FAILED: balanced_margin floor" in floor.stdout
    snapshot = cli("check", str(runs["plain"]), "--baseline", str(runs["hardened"] / "snapshot.json"))
    assert "unpaired" in snapshot.stdout  # no per-prompt results in a snapshot: the wider interval


def test_incomparable_runs_are_refused_with_one_line(runs):
    done = cli("diff", str(runs["plain"]), str(runs["standard"]))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "different suite" in done.stderr
    missing = cli("check", str(runs["plain"]), "--baseline", str(runs["plain"] / "nope"))
    assert missing.returncode == 2 and "no such run folder or snapshot file" in missing.stderr
    negative = cli("check", str(runs["plain"]), "--baseline", str(runs["hardened"]), "--max-drop", "-1")
    assert negative.returncode == 2 and "--max-drop" in negative.stderr


@pytest.mark.slow
def test_xstest_plain_against_hardened(xstest_csv, tmp_path, tmp_path_factory):
    """The issue's acceptance: on XSTest, the plain keyword run fails against the hardened one
    (balanced margin −0.85 [−1.66, −0.22]) and the reverse passes; per class, the hardened run's
    unsafe margin fell (skeleton's rn → m lets prompts through), which --per-class gates."""
    margin.run("keyword", dataset=str(xstest_csv), normalize="all", engine="local", cache=False,
               out=tmp_path / "hardened")
    plain, hardened = str(keyword_xstest_run(tmp_path_factory, xstest_csv)), str(tmp_path / "hardened")
    assert cli("check", plain, "--baseline", hardened).returncode == 1
    assert cli("check", hardened, "--baseline", plain).returncode == 0
    per_class = cli("check", hardened, "--baseline", plain, "--per-class")
    assert per_class.returncode == 1 and "FAILED: unsafe_margin" in per_class.stdout
    document = json.loads(cli("diff", plain, hardened, "--json").stdout)
    row = document["figures"]["balanced_margin"]
    assert row["difference"] == pytest.approx(0.8466, abs=1e-3) and row["moves"]
