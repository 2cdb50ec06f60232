"""A study's snapshot carries its judge's validation; publish marks it provisional without one
(or below `judge.min_kappa`); two judges' agreement sits beside each one's with people."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from margin.datasets.completions import read_all
from margin.errors import InputError
from margin.judges.rules import RuleJudge, classify
from margin.judges.verdicts import JudgeVerdict
from margin.reports.pairings import validate_pairings
from margin.reports.publish import publish
from margin.site.build import build_site
from margin.studies.plan import plan_study
from margin.studies.report import judges_table
from margin.studies.results import judges_agreement
from margin.studies.runner import run_study
from margin.studies.validate import validate
from tests.judges.test_validation import TOY, cli, kappa_by_hand
from tests.support.study import study_config, toy_server, write_config


@pytest.fixture(scope="module")
def record(tmp_path_factory) -> Path:
    """refusal-rules validated on the toy labels files (as `margin judge validate --out` writes it)."""
    out = tmp_path_factory.mktemp("validation")
    validate(RuleJudge(), read_all(TOY), out)
    return out / "validation.json"


@pytest.fixture(scope="module")
def weak_record(tmp_path_factory) -> Path:
    """The same judge on labels where people disagree with it twice: kappa well below 1."""
    out = tmp_path_factory.mktemp("weak")
    lines = TOY[0].read_text().splitlines(keepends=True)
    for i in (1, 3):  # a compliance labelled a refusal, a refusal labelled a compliance
        head, label = lines[i].rstrip("\n").rsplit(",", 1)
        lines[i] = head + "," + ("2_full_refusal" if label == "1_full_compliance" else "1_full_compliance") + "\n"
    labels = out / "weak.csv"
    labels.write_text("".join(lines))
    validate(RuleJudge(), read_all([labels]), out / "v")
    return out / "v" / "validation.json"


def run(tmp_path: Path, url: str, judge: dict | str, second: bool = False) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = study_config(url, second_judge="toy-judge" if second else None)
    config["judge"] = judge
    plan = plan_study(write_config(tmp_path, config))
    return run_study(plan, tmp_path / "out", engine="local", cache=False).pairings


def published(tmp_path: Path) -> tuple[dict, str]:
    pub = tmp_path / "pub"
    publish([tmp_path / "out"], pub, plots=False)
    build_site(pub, tmp_path / "site")
    return json.loads((pub / "pairings.json").read_text()), (tmp_path / "site" / "pairings.html").read_text()


def test_a_validated_judge_publishes_its_figures_and_no_provisional_mark(tmp_path, record):
    saved = json.loads(record.read_text())
    with toy_server() as url:
        pairings = run(tmp_path, url, {"rules": "refusal-rules", "validation": str(record), "min_kappa": 0.5})
    judge = pairings["meta"]["judge"]
    v = judge["validation"]
    assert v["n"] == saved["n"] and v["kappa_comply"] == saved["kappa_comply"]
    assert v["ceiling_kappa_comply"] == saved["ceiling_kappa_comply"]
    assert [x["sha256"] for x in v["labels"]] == [x["sha256"] for x in saved["labels"]]
    assert judge["min_kappa"] == 0.5 and saved["kappa_comply"]["estimate"] >= 0.5
    snapshot, html = published(tmp_path)
    assert snapshot["meta"]["provisional"] is False and snapshot["meta"]["provisional_reason"] is None
    assert snapshot["meta"]["judge"]["validation"] == v
    assert 'data-provisional="false"' in html and "Provisional:" not in html
    assert f"{v['kappa_comply']['estimate']:.3f} [{v['kappa_comply']['low']:.3f}, " in html
    assert f"n = {v['n']}" in html


def test_without_validation_or_below_min_kappa_publish_marks_the_study_provisional(tmp_path, weak_record):
    with toy_server() as url:
        pairings = run(tmp_path / "a", url, "refusal-rules")
        assert "validation" not in pairings["meta"]["judge"] and "min_kappa" not in pairings["meta"]["judge"]
        snapshot, html = published(tmp_path / "a")
        assert snapshot["meta"]["provisional"] is True
        assert "no validation" in snapshot["meta"]["provisional_reason"]
        assert 'data-provisional="true"' in html and "not validated" in html
        pairings = run(tmp_path / "b", url, {"rules": "refusal-rules", "validation": str(weak_record),
                                             "min_kappa": 0.8})
    assert pairings["meta"]["judge"]["validation"]["kappa_comply"]["estimate"] < 0.8
    snapshot, html = published(tmp_path / "b")
    assert snapshot["meta"]["provisional"] is True
    assert "below min_kappa 0.8" in snapshot["meta"]["provisional_reason"]
    assert "below min_kappa 0.8" in html


def test_a_validation_record_of_another_judge_is_refused_naming_the_file_and_field(tmp_path, record, capsys):
    other = tmp_path / "other.json"
    other.write_text(record.read_text().replace('"refusal-rules"', '"someone-else"', 1))
    with toy_server() as url:
        config = study_config(url)
        config["judge"] = {"rules": "refusal-rules", "validation": str(other)}
        path = write_config(tmp_path, config)
        with pytest.raises(InputError) as caught:
            plan_study(path)
        code, _, err = cli(capsys, "study", str(path), "--out", str(tmp_path / "out"))
    assert caught.value.path == str(other) and caught.value.field == "judge"
    assert "judge.validation" in str(caught.value) and "someone-else" in str(caught.value)
    assert code == 2 and "other.json" in err and not (tmp_path / "out").exists()
    config["judge"]["validation"] = "nowhere.json"
    with pytest.raises(InputError, match="no such judge validation record") as caught:
        plan_study(write_config(tmp_path, config))
    assert caught.value.path == str(tmp_path / "nowhere.json")


def test_two_judges_agreement_with_each_other_is_cohens_kappa_on_comply_by_hand(tmp_path, record):
    with toy_server() as url:
        pairings = run(tmp_path, url, {"rules": "refusal-rules", "validation": str(record)}, second=True)
    cases = [json.loads(line) for line in (tmp_path / "out" / "cases.jsonl").read_text().splitlines()]
    first, second = [], []
    for case in cases:
        rules, llm = case["judges"]
        for side in ("original_behaviour", "transformed_behaviour"):
            assert rules[side] == classify(case[side.split("_")[0] + "_response"])
            if llm[side] is not None:
                first.append(rules[side] == "complies")
                second.append(llm[side] == "complies")
    inter = pairings["meta"]["judge"]["inter_judge"]
    assert inter["n"] == len(first) == 24
    assert inter["kappa_comply"]["estimate"] == pytest.approx(kappa_by_hand(first, second), abs=1e-4)
    assert pairings["meta"]["judge"]["second"].get("validation") is None
    table = judges_table(validate_pairings(pairings, "pairings.json"))
    assert table is not None and table.row_count == 3
    _, html = published(tmp_path)
    assert 'id="inter-judge"' in html and "refusal-rules and second" in html and "second and people" in html


def test_inter_judge_kappa_by_hand_on_a_small_case():
    def v(before: str | None, after: str | None) -> JudgeVerdict:
        status = "unparseable" if before is None else ("preserved" if before == after else "changed")
        return JudgeVerdict(status, "r", before, after)  # type: ignore[arg-type]
    both = [(v("complies", "complies"), v("complies", "refuses")),
            (v("refuses", "refuses"), v("refuses", "refuses")),
            (v("complies", "other"), v("complies", "refuses")),
            (v("refuses", "complies"), v(None, None))]  # unparseable: both its sides left out
    # judge 1: C C | R R | C N ; judge 2: C N | R R | C N  (N = not comply): 6 sides, agree on 5
    # p_o = 5/6; judge 1 has 3 comply of 6, judge 2 has 2: p_e = (3*2 + 3*4) / 36 = 1/2; kappa = 2/3
    figures = judges_agreement(both)
    assert figures.n == 6
    assert figures.kappa_comply["estimate"] == pytest.approx(2 / 3, abs=1e-4)
    assert figures.accuracy_comply["estimate"] == pytest.approx(5 / 6, abs=1e-4)
