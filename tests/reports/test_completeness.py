"""Incomplete evidence is never published as a guard's result: a run's snapshot says what it
is missing (per class, with the first error), `margin report` marks the headline, `margin
publish` refuses it unless told otherwise and then never ranks it, and the site marks it.
Runs are real folders made with test guards that fail on some prompts; the CLI is the real one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from margin.datasets import load_dataset
from margin.errors import InputError
from margin.reports.completeness import NO_RECORD, Coverage, decided_by_invalid
from margin.reports.snapshot_schema import validate_snapshot
from margin.runfolder import read_results
from margin.types import SearchResult
from tests.support.cli import margin
from tests.support.guards import FlakyGuard, HashGuard
from tests.support.runs import make_run

SAFE = [p for p in load_dataset("sample").prompts if p.label == "safe"]


def snapshot_record(run: Path) -> dict:
    return json.loads((run / "snapshot.json").read_text("utf-8"))["data"][0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """`lost`: one safe prompt's original never answered; `full`: complete, invalid outputs
    included; `dead`: a guard that fails every call (48 of 48 prompts missing)."""
    root = tmp_path_factory.mktemp("runs")
    return {
        "lost": make_run(root / "lost", FlakyGuard(HashGuard(0.5), fail_every=0, drop_text=SAFE[0].text),
                         attempts=2),
        "full": make_run(root / "full", HashGuard(0.5, invalid_share=0.1, salt="-invalid")),
        "dead": make_run(root / "dead", FlakyGuard(HashGuard(0.5, salt="-dead"), fail_every=1), attempts=1),
    }


def test_an_incomplete_runs_snapshot_says_what_is_missing_and_why_and_is_not_ranked(runs):
    record = snapshot_record(runs["lost"])
    coverage = record["coverage"]
    assert coverage["total"] == {"unsafe": 24, "safe": 24}
    assert coverage["scored"] == {"unsafe": 24, "safe": 23} and coverage["missing"] == {"unsafe": 0, "safe": 1}
    assert coverage["complete"] is False
    assert coverage["reason"] == f"prompt {SAFE[0].id}: no output"  # what its receipts recorded
    assert record["rank"] is None


def test_invalid_outputs_are_counted_in_coverage(runs):
    results = read_results(runs["full"] / "results.jsonl")
    expected = {label: sum(1 for r in results if r.label == label and (
        r.clean_verdict == "invalid" or (r.flip is not None and r.flip.verdict == "invalid")))
        for label in ("unsafe", "safe")}
    record = snapshot_record(runs["full"])
    assert record["coverage"]["invalid"] == expected and sum(expected.values()) > 0
    assert sum(decided_by_invalid(r) for r in results) == sum(expected.values())
    assert record["coverage"]["complete"] is True and record["coverage"]["reason"] is None
    assert record["rank"] == 1


def test_report_marks_the_headline_of_an_incomplete_run(runs):
    done = margin("report", str(runs["lost"]))
    assert done.returncode == 0, done.stderr
    head = done.stdout.split("┏")[0]  # the first table's title
    assert "INCOMPLETE" in head and "safe 23/24" in " ".join(head.split())
    assert "INCOMPLETE" not in margin("report", str(runs["full"])).stdout


def test_publish_refuses_an_incomplete_run_in_one_line_and_writes_nothing(runs, tmp_path):
    out = tmp_path / "published"
    done = margin("publish", str(runs["full"]), str(runs["lost"]), "--out", str(out))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert str(runs["lost"]) in lines[0] and "safe 23/24 (95.8%)" in lines[0] and "--allow-incomplete" in lines[0]
    assert str(runs["full"]) not in lines[0]  # only what is short is named
    assert not out.exists()


def test_a_stated_min_coverage_publishes_a_run_above_it_ranked_and_marked(runs, tmp_path):
    out = tmp_path / "published"
    assert margin("publish", str(runs["lost"]), "--out", str(out), "--min-coverage", "99%").returncode == 2
    done = margin("publish", str(runs["lost"]), "--out", str(out), "--min-coverage", "95%")
    assert done.returncode == 0, done.stderr
    snapshot = json.loads((out / "guardrails.json").read_text("utf-8"))
    assert snapshot["meta"]["min_coverage"] == 0.95
    [record] = snapshot["data"]
    assert record["rank"] == 1 and record["coverage"]["complete"] is False
    bad = margin("publish", str(runs["lost"]), "--out", str(tmp_path / "x"), "--min-coverage", "150%")
    assert bad.returncode == 2 and "--min-coverage" in bad.stderr


def test_allow_incomplete_publishes_it_unranked_and_the_site_marks_it(runs, tmp_path):
    out, site = tmp_path / "published", tmp_path / "site"
    done = margin("publish", str(runs["full"]), str(runs["lost"]), str(runs["dead"]), "--out", str(out),
                  "--allow-incomplete", "--min-coverage", "0%")
    assert done.returncode == 0, done.stderr
    snapshot = json.loads((out / "guardrails.json").read_text("utf-8"))
    ranks = [(r["id"], r["rank"], r["coverage"]["complete"]) for r in snapshot["data"]]
    # 48 of 48 missing is never ranked, whatever the minimum; 23 of 24 is, above 0%.
    assert ranks[-1] == ("hash-dead", None, False)
    assert {gid: complete for gid, rank, complete in ranks if rank is not None} == {"hash": False,
                                                                                   "hash-invalid": True}
    assert [rank for _, rank, _ in ranks] == [1, 2, None]
    dead = snapshot["data"][-1]["coverage"]
    assert dead["scored"] == {"unsafe": 0, "safe": 0} and "simulated timeout" in dead["reason"]
    assert margin("site", str(out), "--out", str(site)).returncode == 0
    html = (site / "index.html").read_text("utf-8")
    row = html[html.index('id="guard-hash-2d-dead"'):]
    assert '<td class="rank">—</td>' in row[:row.index("</tr>")]
    assert "incomplete: unsafe 0/24, safe 0/24 scored, unranked" in row
    assert 'id="incomplete-note"' in html
    assert "0.0% of each class&#39;s prompts" in (site / "methodology.html").read_text("utf-8")


def test_the_site_refuses_a_snapshot_that_ranks_what_its_minimum_excludes(runs, tmp_path):
    out = tmp_path / "published"
    assert margin("publish", str(runs["lost"]), "--out", str(out), "--allow-incomplete").returncode == 0
    snapshot = json.loads((out / "guardrails.json").read_text("utf-8"))
    validate_snapshot(snapshot, "ok")
    snapshot["data"][0]["rank"] = 1  # ranked although below min_coverage 100%
    with pytest.raises(InputError, match="below the snapshot's min_coverage"):
        validate_snapshot(snapshot, "edited")
    snapshot["data"][0]["rank"] = None
    snapshot["data"][0]["coverage"]["complete"] = True  # says complete with a prompt missing
    with pytest.raises(InputError, match="complete disagrees"):
        validate_snapshot(snapshot, "edited")


def test_a_merge_missing_a_shard_is_marked_and_says_no_verdict_was_recorded(tmp_path):
    shard, merged = tmp_path / "shard", tmp_path / "merged"
    done = margin("run", "--guard", "keyword", "--suite", "quick", "--shard", "1/2", "--engine", "local",
                  "--no-cache", "--out", str(shard))
    assert done.returncode == 0, done.stderr
    done = margin("merge", str(shard), "--out", str(merged), "--max-missing", "100%")
    assert done.returncode == 0, done.stderr
    coverage = snapshot_record(merged)["coverage"]
    assert coverage["complete"] is False and sum(coverage["missing"].values()) > 0
    assert coverage["reason"].endswith(": no verdict recorded")  # in no merged folder: no receipt at all
    printed = " ".join(done.stdout.split())  # the console wraps long lines
    assert "INCOMPLETE: unsafe 12/24 (50.0%), safe 12/24 (50.0%) scored, 24 missing" in printed
    assert coverage["reason"] in printed


def test_load_snapshots_says_which_rows_are_incomplete(runs):
    import margin

    table = margin.load_snapshots([str(runs[name] / "snapshot.json") for name in ("lost", "full", "dead")])
    assert table.select("guard", "rank", "complete").rows() == [("hash", None, False), ("hash-invalid", 1, True),
                                                                ("hash-dead", None, False)]


def test_an_ablation_row_on_incomplete_evidence_is_marked():
    from rich.console import Console

    from margin.reports.ablation import DefenceRecord
    from margin.reports.tables import ABLATION_COLUMNS, ablation_margins_table

    def row(name, missing):
        coverage = {"scored": {"unsafe": 24, "safe": 24 - missing}, "missing": {"unsafe": 0, "safe": missing},
                    "total": {"unsafe": 24, "safe": 24}}
        return DefenceRecord.model_validate({
            "defence": name, "normalize": None, "guard_id": "g", "run": name,
            "figures": {f: {"value": 1.0, "interval": [0.5, 1.5]} for f, _ in ABLATION_COLUMNS},
            "coverage": coverage, "guard_calls": 10, "decoded_calls": 0, "total_calls": 10, "change": None,
            "clean": None, "cheapest_flips": {}, "effectiveness": None})

    console = Console(width=400, record=True)
    console.print(ablation_margins_table("g", [row("none", 0), row("nfkc", 2)]))
    text = console.export_text()
    assert "nfkc (incomplete: unsafe 24/24, safe 22/24)" in text and "none (incomplete" not in text


def test_coverage_rules_by_hand_and_an_older_record_read_back_as_it_was():
    results = [SearchResult("u1", "unsafe", "t", "unsafe", 0.0, False, None, 1),
               SearchResult("u2", "unsafe", "t", "invalid", 0.0, False, None, 1),
               SearchResult("u3", "unsafe", "t", None, None, False, None, 1, "missing"),
               SearchResult("s1", "safe", "t", "safe", 100.0, True, None, 1)]
    cov = Coverage.of(results, None)
    assert cov.document() == {"scored": {"unsafe": 2, "safe": 1}, "missing": {"unsafe": 1, "safe": 0},
                              "total": {"unsafe": 3, "safe": 1}, "invalid": {"unsafe": 1, "safe": 0},
                              "complete": False, "reason": NO_RECORD}
    assert cov.shares() == {"unsafe": 2 / 3, "safe": 1.0}
    assert cov.meets(0.66) and not cov.meets(0.67) and not cov.is_complete()
    assert cov.scored_of_total() == "unsafe 2/3, safe 1/1"
    assert cov.describe() == ("unsafe 2/3 (66.7%), safe 1/1 (100.0%) scored, 1 missing, 1 decided by invalid "
                              f"outputs; first error: {NO_RECORD}")
    # A record written before `total` and `invalid` were: totals come from scored + missing,
    # and it is written back with exactly the keys it had.
    older = {"scored": {"unsafe": 3, "safe": 0}, "missing": {"unsafe": 1, "safe": 0}}
    cov = Coverage.model_validate(older)
    assert cov.totals() == {"unsafe": 4, "safe": 0} and cov.shares() == {"unsafe": 0.75}
    assert cov.document() == older and cov.describe() == "unsafe 3/4 (75.0%) scored, 1 missing"
