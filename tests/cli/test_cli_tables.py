"""Tables piped or redirected (`margin report RUN | less`, a CI log) are never cut (issue 35,
item 7): stdout that is not a terminal gets every table as wide as its contents, so names
that differ only at their end stay apart; and the commands with tables also print `--json`."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import margin
from tests.support.cli import margin as cli
from tests.support.study import study_config, toy_server, write_config

#: Two slices whose names differ only after 80 columns' worth of text.
LONG = "contrast_discrimination_of_nonsense_groups_written_out_at_length_so_that_a_cut_hides_the_"
SLICES = (LONG + "first", LONG + "second")

#: Whatever $COLUMNS the test runner has, margin's output here is a pipe with no width set.
PIPED = {"COLUMNS": None}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A keyword run of 8 sample prompts, half of them in each long-named slice."""
    root = tmp_path_factory.mktemp("tables")
    rows = list(csv.DictReader((Path(margin.__file__).parent / "data" / "sample.csv").open(encoding="utf-8")))
    chosen = [r for r in rows if r["label"] == "safe"][:4] + [r for r in rows if r["label"] == "unsafe"][:4]
    for i, row in enumerate(chosen):
        row["type"] = SLICES[i % 2]
    data = root / "long-slices.csv"
    with data.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(chosen[0]))
        writer.writeheader()
        writer.writerows(chosen)
    margin.run("keyword", dataset=str(data), suite="quick", engine="local", cache=False, out=root / "run")
    return root / "run"


def test_a_piped_report_shows_every_slice_name_in_full(run_dir):
    done = cli("report", str(run_dir), env=PIPED)
    assert done.returncode == 0, done.stderr
    assert all(name in done.stdout for name in SLICES), done.stdout
    assert "…" not in done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) > 100  # wider than a terminal's 80


def test_columns_still_sets_the_width_when_given(run_dir):
    done = cli("report", str(run_dir), env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 80


def test_check_prints_its_verdict_as_json(run_dir):
    done = cli("check", str(run_dir), "--baseline", str(run_dir), "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["passed"] is True
    assert [f["figure"] for f in document["findings"] if f["gated"]] == ["balanced_margin"]
    assert document["diff"]["figures"]["balanced_margin"]["difference"] == 0


@pytest.mark.slow  # two defences' runs in a subprocess
def test_ablate_prints_its_record_as_json(tmp_path):
    out = tmp_path / "ablation"
    done = cli("ablate", "--guard", "keyword", "--suite", "quick", "--limit", "6", "--search", "cheapest",
               "--defences", "nfkc", "--engine", "local", "--no-cache", "--out", str(out), "--json", env=PIPED)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads((out / "ablation.json").read_text(encoding="utf-8"))


@pytest.mark.slow  # a study in a subprocess, then its tables again from its receipts
def test_a_piped_study_shows_transformation_names_in_full_and_prints_json(tmp_path):
    out = tmp_path / "study"
    with toy_server() as url:
        config = write_config(tmp_path, study_config(url, transformations=[("fullwidth", "100%"),
                                                                            ("zero-width-space", "100%")]))
        args = ["study", str(config), "--engine", "local", "--no-cache", "--out", str(out)]
        done = cli(*args, "--json", env=PIPED)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == json.loads((out / "pairings.json").read_text(encoding="utf-8"))
        again = cli(*args, "--resume", env=PIPED)  # everything replayed from its receipts
    assert again.returncode == 0, again.stderr
    assert "fullwidth" in again.stdout and "zero-width-space" in again.stdout and "…" not in again.stdout
