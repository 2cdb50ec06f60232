"""Issue 36, item 3: a study's record (study.json) is a frozen, typed StudyRecord, built from
the plan, written and read back by one class, compared by `differences` on resume."""

from __future__ import annotations

import json

import pytest

from margin.errors import InputError
from margin.runfolder import dumps
from margin.studies.plan import plan_study
from margin.studies.record import read_study_record, record_from_json
from tests.support.study import study_config, write_config

URL = "http://127.0.0.1:9/v1"  # never called

# study.json's keys, in the order study.json has always had them (folders made before the record resume).
KEYS = ["protocol", "name", "dataset", "prompts", "transformations", "seed", "guards", "models", "judges",
        "thresholds"]


@pytest.fixture
def plan(tmp_path):
    return plan_study(write_config(tmp_path, study_config(URL, prompts={"limit": 10})))


def test_the_record_writes_study_json_with_its_keys_in_their_order_and_reads_back_equal(tmp_path, plan):
    record = plan.record()
    data = record.to_json()
    assert list(data) == [*KEYS, "limit_sample"]
    assert data["limit_sample"] == {"method": "stratified", "by_label": {"safe": 5, "unsafe": 5}}
    path = tmp_path / "study.json"
    path.write_text(dumps(data) + "\n")
    again = read_study_record(path)
    assert again == record and again.differences(record) == []
    assert dumps(again.to_json()) == dumps(data)  # the same bytes, so a resumed study rewrites nothing


def test_differences_name_the_keys_that_changed(tmp_path, plan):
    data = plan.record().to_json()
    data["seed"] = 7
    data["thresholds"] = {**data["thresholds"], "evasion": 0.5}
    changed = record_from_json(data, tmp_path / "study.json")
    assert plan.record().differences(changed) == ["seed", "thresholds"]


@pytest.mark.parametrize(("edit", "message", "field"), [
    (lambda d: d.pop("guards"), "missing", "guards"),
    (lambda d: d.update(seed="7"), "expected an integer, not str", "seed"),
    (lambda d: d.update(seed=True), "expected an integer, not bool", "seed"),
    (lambda d: d.update(prompts="s1"), "expected a list, not str", "prompts"),
    (lambda d: d.update(extra=1), "unknown key 'extra'", "extra"),
    (lambda d: d["transformations"][0].pop("strength"), "malformed study record", None),
])
def test_a_malformed_study_json_is_one_error_naming_the_file_and_key(tmp_path, plan, edit, message, field):
    data = json.loads(dumps(plan.record().to_json()))
    edit(data)
    path = tmp_path / "study.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputError, match=message) as caught:
        read_study_record(path)
    assert caught.value.field == field and str(path) in str(caught.value)


@pytest.mark.parametrize("text", ["", "[1, 2]", "{not json"])
def test_an_empty_or_broken_study_json_is_one_error(tmp_path, text):
    path = tmp_path / "study.json"
    path.write_text(text)
    with pytest.raises(InputError, match="not a JSON object|not JSON") as caught:
        read_study_record(path)
    assert str(path) in str(caught.value)
