"""`margin export`: each format checked by its real reader or schema — inspect_ai's own
`read_eval_log`, the SARIF 2.1.0 JSON schema the standard publishes (shipped in
tests/reports/data, the OASIS errata01 file), JUnit XML parsed and checked for its structure,
garak's report fields as garak's evaluator writes and its analyzer reads them, and
JailbreakBench's artifact fields as a pydantic model."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from pydantic import BaseModel, ConfigDict, Field

import margin
from margin.cli.common import families
from margin.datasets import load_dataset
from margin.reports.exports.sarif import level
from margin.runfolder import load_run
from tests.support.cli import margin as cli
from tests.support.shared_runs import keyword_xstest_run

SCHEMA = Path(__file__).parents[1] / "reports" / "data" / "sarif-schema-2.1.0.json"


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "plain"
    margin.run("keyword", suite="quick", engine="local", cache=False, out=out)
    return out


def export(run: Path, fmt: str, out: Path) -> Path:
    done = cli("export", str(run), "--format", fmt, "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out


def cheapest_counts(run: Path) -> dict[str, dict[str, int]]:
    """Per family and class, the prompts right on the original whose cheapest flip it holds."""
    fams = families()
    counts: dict[str, dict[str, int]] = {}
    for r in load_run(run).results:
        if r.flip is not None and r.flip_cost:
            counts.setdefault(fams[r.flip.transform], {"unsafe": 0, "safe": 0})[r.label] += 1
    return counts


def test_inspect_log_loads_in_inspect_ai(plain, tmp_path):
    inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect_ai is a test extra (pip install inspect_ai)")
    log = inspect_log.read_eval_log(str(export(plain, "inspect", tmp_path / "plain.json")))
    results = {r.prompt_id: r for r in load_run(plain).results}
    texts = {p.id: p.text for p in load_dataset("sample").prompts}
    assert log.status == "success" and log.eval.model == "margin/keyword" and len(log.samples) == 48
    for s in log.samples:
        r = results[s.id]
        assert s.input == texts[s.id] and s.target == r.label
        assert s.scores["margin"].value == pytest.approx(r.flip_cost / 100.0)
        assert s.output.completion == r.clean_verdict
    snapshot = json.loads((plain / "snapshot.json").read_text("utf-8"))["data"][0]
    metrics = log.results.scores[0].metrics
    assert metrics["balanced_margin"].value == pytest.approx(snapshot["balanced_margin"])


def test_sarif_validates_against_the_2_1_0_schema(plain, tmp_path):
    document = json.loads(export(plain, "sarif", tmp_path / "plain.sarif").read_text("utf-8"))
    jsonschema.Draft4Validator(json.loads(SCHEMA.read_text("utf-8"))).validate(document)
    run = document["runs"][0]
    counts = cheapest_counts(plain)
    assert {r["ruleId"] for r in run["results"]} == {f"margin/{f}" for f in counts}
    assert len(run["tool"]["driver"]["rules"]) >= len(counts)
    homoglyph = next(r for r in run["results"] if r["ruleId"] == "margin/homoglyph")
    right = sum(1 for r in load_run(plain).results if r.flip_cost)
    rate = sum(counts["homoglyph"].values()) / right
    assert homoglyph["level"] == level(rate) and homoglyph["properties"]["flip_rate"] == pytest.approx(rate)
    line = homoglyph["locations"][0]["physicalLocation"]["region"]["startLine"]
    flipped = json.loads((plain / "results.jsonl").read_text("utf-8").splitlines()[line - 1])
    assert families()[flipped["flip"]["transform"]] == "homoglyph"


def test_sarif_levels_by_flip_rate():
    assert [level(r) for r in (0.0, 0.05, 0.1, 0.49, 0.5, 1.0)] == ["note", "note", "warning", "warning",
                                                                     "error", "error"]


def test_junit_has_a_case_per_class_and_family(plain, tmp_path):
    root = ET.parse(export(plain, "junit", tmp_path / "plain.xml")).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["margin.keyword.unsafe", "margin.keyword.safe"]
    counts = cheapest_counts(plain)
    for suite, label in zip(suites, ("unsafe", "safe"), strict=True):
        cases = suite.findall("testcase")
        assert int(suite.get("tests")) == len(cases) and len({c.get("name") for c in cases}) == len(cases)
        failed = {c.get("name") for c in cases if c.find("failure") is not None}
        assert failed == {f for f, by in counts.items() if by[label]}
        assert int(suite.get("failures")) == len(failed)
    assert int(root.get("tests")) == sum(int(s.get("tests")) for s in suites)
    assert int(root.get("failures")) == sum(int(s.get("failures")) for s in suites)


def test_garak_report_has_an_eval_line_per_family(plain, tmp_path):
    lines = [json.loads(x) for x in export(plain, "garak", tmp_path / "plain.report.jsonl").read_text().splitlines()]
    assert [x["entry_type"] for x in lines[:2]] == ["start_run setup", "init"]
    assert lines[-1]["entry_type"] == "completion"
    evals = [x for x in lines if x["entry_type"] == "eval"]
    counts = cheapest_counts(plain)
    right = sum(1 for r in load_run(plain).results if r.flip_cost)
    for row in evals:  # the fields garak's evaluator writes and its analyze_log reads
        assert row["probe"].startswith("margin.") and row["detector"] == "margin.CheapestFlip"
        assert row["passed"] + row["fails"] == row["total_evaluated"] == row["total_processed"] == right
        assert row["fails"] == sum(counts.get(row["probe"].removeprefix("margin."), {}).values())


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


class AttackArtifact(BaseModel):
    parameters: AttackParameters
    jailbreaks: list[JailbreakInfo]


def test_jbb_artifact_has_the_unsafe_prompts_with_their_flips(plain, tmp_path):
    artifact = AttackArtifact.model_validate_json(export(plain, "jbb", tmp_path / "plain.jbb.json").read_text())
    unsafe = [r for r in load_run(plain).results if r.label == "unsafe"]
    assert len(artifact.jailbreaks) == artifact.parameters.number_of_submitted_prompts == len(unsafe)
    broken = [r for r in unsafe if r.flip_cost == 0 or r.flip is not None]
    assert artifact.parameters.total_number_of_jailbreaks == len(broken)
    assert artifact.parameters.attack_success_rate == pytest.approx(len(broken) / len(unsafe))
    by_id = {j.behavior: j for j in artifact.jailbreaks}
    for r in unsafe:
        entry = by_id[r.prompt_id]
        assert entry.number_of_queries == r.guard_calls
        if r.flip is not None and r.flip_cost:
            assert entry.prompt == r.flip.text and entry.queries_to_jailbreak == r.guard_calls


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
    done = cli("export", str(plain), "--format", "inspect", "--out", str(tmp_path / "x"))
    assert done.returncode == 2 and "--out" in done.stderr and "*.json" in done.stderr
    assert not (tmp_path / "x").exists()


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
