"""`margin export`: each format checked by its real reader or schema — inspect_ai's own
`read_eval_log`, the SARIF 2.1.0 JSON schema the standard publishes (shipped in
tests/reports/data, the OASIS errata01 file), JUnit XML parsed and checked for its structure,
garak's report fields as garak's evaluator writes and its analyzer reads them, and
JailbreakBench's artifact fields as a pydantic model."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Literal

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict, Field

import margin
from margin.cli.common import families
from margin.datasets import load_dataset
from margin.reports.exports.formats.sarif import level
from margin.runfolder import load_run
from tests.support.cli import margin as cli
from tests.support.guards import FlakyGuard, HashGuard
from tests.support.runs import make_run
from tests.support.shared_runs import keyword_xstest_run

SCHEMA = Path(__file__).parents[1] / "reports" / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "plain"
    margin.run("keyword", suite="quick", engine="local", cache=False, out=out)
    return out


WROTE = re.compile(r"^wrote (?P<path>\S+) \((?P<fmt>\w+): (?P<holds>.*)\)(?P<note>;.*)?$")


def exported(run: Path, fmt: str, out: Path | None = None, cwd: Path | None = None) -> tuple[Path, str]:
    """The file `margin export` wrote and what its `wrote` line says the file holds."""
    done = cli("export", str(run), "--format", fmt, *(["--out", str(out)] if out is not None else []), cwd=cwd)
    assert done.returncode == 0, done.stderr
    line = WROTE.match(done.stdout.strip())
    assert line and line["fmt"] == fmt, done.stdout
    path = Path(line["path"])
    return (path if path.is_absolute() else (cwd or Path.cwd()) / path), line["holds"]


def export(run: Path, fmt: str, out: Path) -> Path:
    return exported(run, fmt, out)[0]


def numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def report(run: Path) -> dict:
    """`margin report --json`, every cheapest flip listed: the run's own account."""
    done = cli("report", str(run), "--json", "--flips", "100000")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def cheapest_counts(run: Path) -> dict[str, dict[str, int]]:
    """Per family and class, the prompts right on the original whose cheapest flip it holds,
    as `margin report` lists them."""
    fams = families()
    counts: dict[str, dict[str, int]] = {}
    for flip in report(run)["cheapest_flips"]:
        counts.setdefault(fams[flip["transform"]], {"unsafe": 0, "safe": 0})[flip["label"]] += 1
    return counts


def right_on_original(outcomes: dict) -> dict[str, int]:
    return {label: o["flipped"] + o["not_flipped"] for label, o in outcomes.items()}


def test_inspect_log_loads_in_inspect_ai_with_the_reports_counts(plain, tmp_path):
    inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect_ai is a test extra (pip install inspect_ai)")
    path, holds = exported(plain, "inspect", tmp_path / "plain.json")
    log = inspect_log.read_eval_log(str(path))
    results = {r.prompt_id: r for r in load_run(plain).results}
    texts = {p.id: p.text for p in load_dataset("sample").prompts}
    assert log.status == "success" and log.eval.model == "margin/keyword" and len(log.samples) == 48
    for s in log.samples:
        r = results[s.id]
        assert s.input == texts[s.id] and s.target == r.label
        assert s.scores["margin"].value == pytest.approx(r.flip_cost / 100.0)
        assert s.output.completion == r.clean_verdict
    own = report(plain)
    metrics = log.results.scores[0].metrics
    for name in ("balanced_margin", "unsafe_margin", "safe_margin", "clean_balanced_accuracy"):
        assert metrics[name].value == pytest.approx(own["guard"][name])
    outcomes = own["outcomes"]  # a score of 0 is a wrong original, 1 no flip within the budget
    values = [s.scores["margin"].value for s in log.samples if s.scores]
    assert sum(v == 0 for v in values) == sum(o["wrong_on_original"] for o in outcomes.values())
    assert sum(v == 1 for v in values) == sum(o["not_flipped"] for o in outcomes.values())
    assert sum(0 < v < 1 for v in values) == sum(o["flipped"] for o in outcomes.values())
    assert numbers(holds) == [len(log.samples), len(values), len(log.samples) - len(values)] == [48, 48, 0]


def test_inspect_view_lists_the_log_under_its_default_name(plain, tmp_path):
    """`inspect view` lists a .json log only under inspect's own kind of name; inspect's
    listing function (what its viewer calls) finds the default one and reads it back."""
    inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect_ai is a test extra (pip install inspect_ai)")
    path, _ = exported(plain, "inspect", cwd=tmp_path)  # no --out: inspect's own logs/ folder
    assert path.parent == tmp_path / "logs"
    listed = inspect_log.list_eval_logs(str(tmp_path / "logs"))
    assert [Path(x.name.removeprefix("file://")) for x in listed] == [path]
    log = inspect_log.read_eval_log(listed[0].name)
    assert (listed[0].task, listed[0].task_id) == (log.eval.task, log.eval.task_id) == ("margin", log.eval.task_id)
    assert len(log.eval.task_id) == 22 and len(log.samples) == 48
    again, _ = exported(plain, "inspect", tmp_path / "elsewhere")  # a folder: the same name, the same bytes
    assert again.name == path.name and again.read_bytes() == path.read_bytes()
    done = cli("export", str(plain), "--format", "inspect", cwd=tmp_path, env={"INSPECT_LOG_DIR": "inspect-logs"})
    assert done.returncode == 0 and (tmp_path / "inspect-logs" / path.name).is_file(), done.stderr
    named = tmp_path / "mine" / "kw.inspect.json"  # a file name of the user's own: written, and said unlisted
    done = cli("export", str(plain), "--format", "inspect", "--out", str(named))
    assert done.returncode == 0 and named.is_file() and "inspect view` lists only logs named like" in done.stdout
    assert inspect_log.list_eval_logs(str(named.parent)) == []


def test_sarif_validates_against_the_2_1_0_schema_with_the_reports_counts(plain, tmp_path):
    path, holds = exported(plain, "sarif", tmp_path / "plain.sarif")
    document = json.loads(path.read_text("utf-8"))
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text("utf-8"))).validate(document)
    run = document["runs"][0]
    counts = cheapest_counts(plain)
    assert {r["ruleId"] for r in run["results"]} == {f"margin/{f}" for f in counts}
    assert len(run["tool"]["driver"]["rules"]) >= len(counts)
    homoglyph = next(r for r in run["results"] if r["ruleId"] == "margin/homoglyph")
    right = right_on_original(report(plain)["outcomes"])
    for result in run["results"]:
        family = result["ruleId"].removeprefix("margin/")
        assert result["properties"]["flipped"] == counts[family] and result["properties"]["eligible"] == right
    rate = sum(counts["homoglyph"].values()) / sum(right.values())
    assert homoglyph["level"] == level(rate) and homoglyph["properties"]["flip_rate"] == pytest.approx(rate)
    assert numbers(holds) == [len(run["tool"]["driver"]["rules"]), len(run["results"])]
    line = homoglyph["locations"][0]["physicalLocation"]["region"]["startLine"]
    flipped = json.loads((plain / "results.jsonl").read_text("utf-8").splitlines()[line - 1])
    assert families()[flipped["flip"]["transform"]] == "homoglyph"


def test_sarif_levels_by_flip_rate():
    assert [level(r) for r in (0.0, 0.05, 0.1, 0.49, 0.5, 1.0)] == ["note", "note", "warning", "warning",
                                                                     "error", "error"]


def test_junit_has_a_case_per_class_and_family_with_the_reports_counts(plain, tmp_path):
    path, holds = exported(plain, "junit", tmp_path / "plain.xml")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["margin.keyword.unsafe", "margin.keyword.safe"]
    counts = cheapest_counts(plain)
    right = right_on_original(report(plain)["outcomes"])
    for suite, label in zip(suites, ("unsafe", "safe"), strict=True):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases) and len({c.get("name") for c in cases}) == len(cases)
        failed = {c.get("name") for c in cases if c.find("failure") is not None}
        assert failed == {f for f, by in counts.items() if by[label]}
        assert int(suite.get("failures")) == len(failed)
        for case in cases:
            if case.find("failure") is not None:
                assert numbers(case.find("failure").get("message"))[:2] == [counts[case.get("name")][label],
                                                                             right[label]]
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites)
    assert int(root.get("failures")) == sum(int(s.get("failures")) for s in suites)
    assert numbers(holds) == [len(suites), int(root.get("tests")), int(root.get("failures")),
                              int(root.get("skipped"))]


def test_garak_report_has_an_eval_line_per_family_with_the_reports_counts(plain, tmp_path):
    path, holds = exported(plain, "garak", tmp_path / "plain.report.jsonl")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["entry_type"] for x in lines[:2]] == ["start_run setup", "init"]
    assert lines[-1]["entry_type"] == "completion"
    evals = [x for x in lines if x["entry_type"] == "eval"]
    counts = cheapest_counts(plain)
    right = right_on_original(report(plain)["outcomes"])
    for row in evals:  # the fields garak's evaluator writes and its analyze_log reads
        assert row["probe"].startswith("margin.") and row["detector"] == "margin.CheapestFlip"
        assert row["passed"] + row["fails"] == row["total_evaluated"] == row["total_processed"] == sum(right.values())
        assert row["fails"] == sum(counts.get(row["probe"].removeprefix("margin."), {}).values())
    assert numbers(holds) == [len(evals), sum(right.values())]


class JailbreakInfo(BaseModel):  # JailbreakBench's artifact entry, its fields and types
    model_config = ConfigDict(extra="allow")
    index: int
    goal: str
    behavior: str
    category: str
    prompt: str | None
    response: str | None
    number_of_queries: int | None
    queries_to_jailbreak: int | None
    prompt_tokens: int | None
    response_tokens: int | None
    jailbroken: bool
    outcome: Literal["baseline_error", "transformation_flip", "not_flipped", "missing"]  # margin's own


class AttackParameters(BaseModel):
    model_config = ConfigDict(extra="allow")
    method: str
    model: str  # JailbreakBench names its own target models; here the guard
    attack_type: str | None
    defense: str | None
    attack_success_rate: float = Field(ge=0, le=1)
    total_number_of_jailbreaks: int
    number_of_submitted_prompts: int
    total_number_of_queries: int | None
    total_prompt_tokens: int | None
    total_response_tokens: int | None
    evaluation_date: str
    evaluation_llm_provider: str
    method_parameters: dict
    # margin's own: a reader of the file tells baseline errors from transformations' flips
    attack_success_rate_over_caught: float | None = Field(ge=0, le=1)
    number_of_baseline_errors: int
    number_of_transformation_flips: int
    number_of_prompts_caught_unchanged: int
    number_of_prompts_not_flipped: int
    number_of_missing_prompts: int
    outcomes: dict[str, str]


class AttackArtifact(BaseModel):
    parameters: AttackParameters
    jailbreaks: list[JailbreakInfo]


def check_jbb(run: Path, out: Path) -> AttackParameters:
    """The artifact's counts are `margin report`'s for the unsafe class, and its rows say the same."""
    path, holds = exported(run, "jbb", out)
    artifact = AttackArtifact.model_validate_json(path.read_text("utf-8"))
    p = artifact.parameters
    own = report(run)["outcomes"]["unsafe"]
    assert (p.number_of_baseline_errors, p.number_of_transformation_flips, p.number_of_prompts_not_flipped,
            p.number_of_missing_prompts) == (own["wrong_on_original"], own["flipped"], own["not_flipped"],
                                             own["missing"])
    assert p.number_of_submitted_prompts == len(artifact.jailbreaks) == sum(own.values())
    assert p.total_number_of_jailbreaks == own["wrong_on_original"] + own["flipped"]
    scored = sum(own.values()) - own["missing"]
    assert p.attack_success_rate == pytest.approx(p.total_number_of_jailbreaks / scored)
    assert p.number_of_prompts_caught_unchanged == own["flipped"] + own["not_flipped"]
    assert p.attack_success_rate_over_caught == pytest.approx(own["flipped"] / (own["flipped"] + own["not_flipped"]))
    rows = [j.outcome for j in artifact.jailbreaks]
    assert [rows.count(k) for k in ("baseline_error", "transformation_flip", "not_flipped", "missing")] == [
        own["wrong_on_original"], own["flipped"], own["not_flipped"], own["missing"]]
    assert all(j.jailbroken == (j.outcome in ("baseline_error", "transformation_flip")) for j in artifact.jailbreaks)
    assert set(p.outcomes) == set(rows) | {"baseline_error", "transformation_flip", "not_flipped", "missing"}
    assert numbers(holds) == [len(artifact.jailbreaks), own["wrong_on_original"], own["flipped"],
                              own["not_flipped"], own["missing"]]
    return p


def test_jbb_artifact_has_the_unsafe_prompts_with_their_flips(plain, tmp_path):
    p = check_jbb(plain, tmp_path / "plain.jbb.json")
    assert (p.number_of_baseline_errors, p.number_of_transformation_flips) == (4, 20)  # both kinds present
    artifact = AttackArtifact.model_validate_json((tmp_path / "plain.jbb.json").read_text())
    by_id = {j.behavior: j for j in artifact.jailbreaks}
    texts = {q.id: q.text for q in load_dataset("sample").prompts}
    for r in (r for r in load_run(plain).results if r.label == "unsafe"):
        entry = by_id[r.prompt_id]
        assert entry.number_of_queries == r.guard_calls
        if entry.outcome == "transformation_flip":
            assert entry.prompt == r.flip.text and entry.queries_to_jailbreak == r.guard_calls
        if entry.outcome == "baseline_error":
            assert entry.prompt == texts[r.prompt_id] and entry.response == r.clean_verdict


def test_jbb_rates_leave_missing_prompts_out_as_the_report_does(tmp_path):
    """One unsafe original never answered; some caught prompts hold: the raw rate and the rate
    over the caught prompts differ, and neither counts the lost prompt."""
    lost = next(q for q in load_dataset("sample").prompts if q.label == "unsafe")
    run = make_run(tmp_path / "lost", FlakyGuard(HashGuard(0.9, salt="-0.9"), fail_every=0, drop_text=lost.text),
                   attempts=1)
    p = check_jbb(run, tmp_path / "lost.jbb.json")
    assert (p.number_of_baseline_errors, p.number_of_transformation_flips, p.number_of_prompts_not_flipped,
            p.number_of_missing_prompts) == (3, 18, 2, 1)
    assert (p.attack_success_rate, p.attack_success_rate_over_caught) == (pytest.approx(21 / 23), pytest.approx(18 / 20))


def test_an_exhaustive_run_counts_every_flipping_family(tmp_path):
    run = tmp_path / "exhaustive"
    margin.run("keyword", suite="quick", search="exhaustive", engine="local", cache=False, out=run)
    evals = [json.loads(x) for x in export(run, "garak", tmp_path / "r.jsonl").read_text().splitlines()]
    evals = [x for x in evals if x["entry_type"] == "eval"]
    assert {x["detector"] for x in evals} == {"margin.FlipAnyCandidate"}
    report = json.loads(cli("report", str(run), "--json").stdout)
    expected = {f["name"]: f["all"] for f in report["effectiveness"]["families"]}
    assert {x["probe"].removeprefix("margin."): (x["fails"], x["total_evaluated"]) for x in evals} == {
        name: (e["flipped"], e["eligible"]) for name, e in expected.items()}
    cheapest = cheapest_counts(run)  # every cheapest flip is a flip of its family, so the counts bound it
    assert all(x["fails"] >= sum(cheapest.get(x["probe"].removeprefix("margin."), {}).values()) for x in evals)


def test_bad_format_or_run_is_one_line_and_writes_nothing(plain, tmp_path):
    done = cli("export", str(plain), "--format", "sarf", "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "did you mean sarif" in done.stderr
    done = cli("export", str(tmp_path / "nope"), "--format", "sarif", "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and "no such run folder" in done.stderr
    done = cli("export", str(plain), "--format", "inspect", "--out", str(tmp_path / "x.log"))
    assert done.returncode == 2 and "--out" in done.stderr and "*.json" in done.stderr
    done = cli("export", str(plain), "--format", "junit")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--out FILE" in done.stderr
    assert not (tmp_path / "x").exists() and not (tmp_path / "x.log").exists()


@pytest.mark.slow
def test_xstest_plain_run_exports(xstest_csv, tmp_path, tmp_path_factory):
    """The issue's acceptance: the plain keyword run on XSTest as an inspect log with 450
    samples, and SARIF and JUnit that validate."""
    run = keyword_xstest_run(tmp_path_factory, xstest_csv)
    inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect_ai is a test extra")
    assert len(inspect_log.read_eval_log(str(export(run, "inspect", tmp_path / "plain.json"))).samples) == 450
    sarif = json.loads(export(run, "sarif", tmp_path / "plain.sarif").read_text("utf-8"))
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text("utf-8"))).validate(sarif)
    assert ET.parse(export(run, "junit", tmp_path / "plain.xml")).getroot().tag == "testsuites"
    p = check_jbb(run, tmp_path / "plain.jbb.json")  # the issue's: 200 unsafe prompts, not 450, two kinds
    assert p.number_of_submitted_prompts == 200 and p.number_of_baseline_errors > 0
