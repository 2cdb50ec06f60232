"""A study whose judge is `refusal-rules` (no model), beside an LLM second judge."""

from __future__ import annotations

import json

from margin.judges.rules import classify
from margin.studies.plan import plan_study
from margin.studies.runner import run_study
from tests.support.study import study_config, toy_server, write_config


def test_a_study_runs_with_refusal_rules_as_its_judge_and_an_llm_second_judge(tmp_path):
    with toy_server() as url:
        config = study_config(url, second_judge="toy-judge")
        config["judge"] = "refusal-rules"
        plan = plan_study(write_config(tmp_path, config))
        outcome = run_study(plan, tmp_path / "out", engine="local", cache=False)
    judge = outcome.pairings["meta"]["judge"]
    assert judge["id"] == "refusal-rules" and judge["parse_rule"] == "refusal-rules/1"
    assert judge["second"]["id"] == "second"
    calls = [json.loads(line) for line in (tmp_path / "out" / "calls.jsonl").read_text().splitlines()]
    assert {c["judge"] for c in calls if c["role"] == "judgement"} == {"second"}  # the rules call nothing
    cases = [json.loads(line) for line in (tmp_path / "out" / "cases.jsonl").read_text().splitlines()]
    assert len(cases) == 12
    for case in cases:
        rules, second = case["judges"]
        before, after = classify(case["original_response"]), classify(case["transformed_response"])
        assert (rules["original_behaviour"], rules["transformed_behaviour"]) == (before, after)
        assert rules["status"] == ("preserved" if before == after else "changed")
        assert second["status"] in ("preserved", "changed")
    row = outcome.pairings["data"][0]["transformations"][0]
    assert row["units"]["preservation"] == 12
