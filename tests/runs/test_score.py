"""`margin score`: everything recomputes from receipts, without calling a guard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from margin.errors import InputError
from margin.runs.recording.score import ScoreOptions, rescore
from tests.support.cli import margin
from tests.support.guards import FlakyGuard, HashGuard, ProbabilityGuard
from tests.support.runs import make_run

FIGURES = ("balanced_margin", "unsafe_margin", "safe_margin", "clean_balanced_accuracy",
           "confidence_intervals", "clean_accuracy", "coverage", "curves", "slices")


def without_date(snapshot: dict) -> dict:
    return {**snapshot, "meta": {k: v for k, v in snapshot["meta"].items() if k != "snapshot_date"}}


def external_lines(run: Path) -> list[dict]:
    """The run's verdicts as a tool outside margin would write them."""
    out = []
    for line in (run / "receipts.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["kind"] == "call" and r["verdict"] is not None:
            out.append({k: r[k] for k in ("prompt_id", "transform", "strength", "seed", "verdict", "p_unsafe")})
    return out


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("search", ["cheapest", "exhaustive"])
def test_rescoring_a_run_reproduces_results_and_snapshot_exactly(tmp_path, search):
    run = make_run(tmp_path / "run", HashGuard(0.5, invalid_share=0.05, salt="s"), search=search)
    rescored = rescore([run])
    assert rescored.differs_from_run == []
    before = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    from margin.runfolder import result_record
    assert [result_record(r) for r in rescored.results] == before
    assert without_date(rescored.snapshot.document()) == without_date(json.loads((run / "snapshot.json").read_text()))
    assert rescored.exhaustive == (search == "exhaustive")
    assert rescored.unmatched == []


def test_lost_coverage_replays_as_lost_coverage(tmp_path):
    from margin.datasets import load_dataset

    dropped = load_dataset("sample").prompts[2].text
    run = make_run(tmp_path / "run", FlakyGuard(HashGuard(0.5), fail_every=0, drop_text=dropped), attempts=2)
    rescored = rescore([run])
    assert rescored.differs_from_run == []
    assert sum(r.status == "missing" for r in rescored.results) >= 1
    assert without_date(rescored.snapshot.document()) == without_date(json.loads((run / "snapshot.json").read_text()))


def test_a_later_file_wins_on_a_collision(tmp_path):
    run = make_run(tmp_path / "run", HashGuard(0.5, salt="w"))
    results = {r.prompt_id: r for r in rescore([run]).results}
    target = next(r for r in results.values() if r.flip_cost and r.flip_cost > 0)
    wrong = "safe" if target.label == "unsafe" else "unsafe"
    retry = write_jsonl(tmp_path / "retry.jsonl", [
        {"prompt_id": target.prompt_id, "transform": None, "strength": None, "seed": 0, "verdict": wrong}])
    later = {r.prompt_id: r for r in rescore([run, retry]).results}
    assert later[target.prompt_id].flip_cost == 0.0 and later[target.prompt_id].clean_verdict == wrong
    assert all(later[p] == results[p] for p in results if p != target.prompt_id)
    earlier = {r.prompt_id: r for r in rescore([retry, run]).results}
    assert earlier == results


def test_verdicts_produced_elsewhere_score_like_the_run(tmp_path):
    run = make_run(tmp_path / "run", ProbabilityGuard(), search="exhaustive")
    verdicts = write_jsonl(tmp_path / "verdicts.jsonl", external_lines(run))
    rescored = rescore([verdicts], ScoreOptions(dataset="sample", suite="quick", guard_id="prob"))
    original = json.loads((run / "snapshot.json").read_text())["data"][0]
    got = rescored.snapshot.document()["data"][0]
    assert got["id"] == "prob" and got["evaluation"]["backend"] == "external"
    assert {k: got[k] for k in FIGURES} == {k: original[k] for k in FIGURES}
    assert rescored.exhaustive


def test_a_candidate_without_a_verdict_is_missing(tmp_path):
    run = make_run(tmp_path / "run", HashGuard(0.5, salt="m"))
    flipped = next(r for r in rescore([run]).results if r.flip is not None)
    lines = [r for r in external_lines(run)
             if not (r["prompt_id"] == flipped.prompt_id and r["transform"] == flipped.flip.transform
                     and r["strength"] == flipped.flip.strength)]
    rescored = rescore([write_jsonl(tmp_path / "v.jsonl", lines)], ScoreOptions(dataset="sample", suite="quick"))
    by_id = {r.prompt_id: r for r in rescored.results}
    assert by_id[flipped.prompt_id].status == "missing" and by_id[flipped.prompt_id].flip_cost is None


def test_a_changed_candidate_text_is_refused(tmp_path):
    run = make_run(tmp_path / "run", HashGuard(0.5), limit=4)
    lines = (run / "receipts.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["text_sha256"] = "0" * 64
    lines[0] = json.dumps(first)
    (run / "receipts.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="rebuilt candidate's text") as info:
        rescore([run])
    assert "receipts.jsonl:1" in str(info.value)


@pytest.mark.parametrize(("line", "field"), [
    ({"prompt_id": "s1", "transform": None, "strength": None, "seed": 0, "verdict": "maybe"}, "verdict"),
    ({"prompt_id": "s1", "transform": None, "strength": None, "seed": "0", "verdict": "safe"}, "seed"),
    ({"prompt_id": "s1", "transform": "homoglyph", "strength": None, "seed": 0, "verdict": "safe"}, "strength"),
    ({"prompt_id": "s1", "transform": None, "strength": None, "seed": 0, "verdict": "safe", "p_unsafe": 2}, "p_unsafe"),
    ({"transform": None, "strength": None, "seed": 0, "verdict": "safe"}, "prompt_id"),
    ({"prompt_id": "s1", "transform": None, "strength": None, "seed": 0}, "verdict"),
])
def test_a_bad_verdict_line_names_file_line_and_field(tmp_path, line, field):
    good = {"prompt_id": "s2", "transform": None, "strength": None, "seed": 0, "verdict": "safe"}
    path = write_jsonl(tmp_path / "v.jsonl", [good, line, good])
    with pytest.raises(InputError) as info:
        rescore([path], ScoreOptions(dataset="sample", suite="quick"))
    assert f"{path}:2" in str(info.value) and field in str(info.value)


def test_receipts_of_two_guards_or_two_suites_do_not_merge(tmp_path):
    a = make_run(tmp_path / "a", HashGuard(0.5, salt="a"), limit=3)
    b = make_run(tmp_path / "b", HashGuard(0.5, salt="b"), limit=3)
    with pytest.raises(InputError, match="guard"):
        rescore([a, b])
    c = make_run(tmp_path / "c", HashGuard(0.5, salt="a"), limit=3, suite="standard")
    with pytest.raises(InputError, match="suite.sha256 differs"):
        rescore([a, c])


def test_verdict_files_alone_need_dataset_and_suite(tmp_path):
    path = write_jsonl(tmp_path / "v.jsonl", [
        {"prompt_id": "s1", "transform": None, "strength": None, "seed": 0, "verdict": "safe"}])
    with pytest.raises(InputError, match="--dataset"):
        rescore([path])


def test_score_cli_writes_everything_and_says_it_matches(tmp_path):
    run = make_run(tmp_path / "run", ProbabilityGuard(), search="exhaustive")
    out = tmp_path / "scored"
    proc = margin("score", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "match the run's results.jsonl" in proc.stdout
    assert {"results.jsonl", "snapshot.json", "curves.png", "curves.svg", "run.json", "transforms.json",
            "sweep.json", "effectiveness.png", "effectiveness.svg"} <= {p.name for p in out.iterdir()}
    assert (out / "results.jsonl").read_bytes() == (run / "results.jsonl").read_bytes()
    assert without_date(json.loads((out / "snapshot.json").read_text())) == \
        without_date(json.loads((run / "snapshot.json").read_text()))
    sweep = json.loads((out / "sweep.json").read_text())
    assert [r["threshold"] for r in sweep["thresholds"]][:3] == [0.05, 0.1, 0.15]
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"prompt_id": "s1", "verdict": "safe", "seed": 0,
                                                 "transform": None, "strength": None}, {"oops": 1}])
    proc = margin("score", str(bad), "--dataset", "sample", "--suite", "quick")
    assert proc.returncode == 2 and f"{bad}:2" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.slow  # two runs, then two margin processes
def test_a_seeded_adaptive_run_rescores_from_its_incumbents_to_the_same_bytes(tmp_path):
    """`margin score` replays an adaptive run with the incumbents it was seeded with: without
    them its searches ask other texts, and the results differed. The two runs are its input,
    made in this process (the same run.json and results as `margin run` writes); `margin
    score` runs as a user runs it."""
    import margin as api

    std, run, out = tmp_path / "std", tmp_path / "ada", tmp_path / "rescored"
    common = {"engine": "local", "cache": False, "limit": 8}
    api.run("keyword", suite="quick", out=std, **common)
    api.run("keyword", search="adaptive", max_calls=12, incumbents=str(std), out=run, **common)
    proc = margin("score", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "results.jsonl").read_bytes() == (run / "results.jsonl").read_bytes()
    assert json.loads((out / "run.json").read_text())["incumbents"] == str(std)

    std.rename(tmp_path / "moved")
    proc = margin("score", str(run), "--out", str(tmp_path / "again"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"seeded with --incumbents {std}, which is not here" in proc.stderr
    assert not (tmp_path / "again").exists()
