"""The run record (run.json): built once by prepare, written and read back unchanged, compared
field by field, and a malformed field refused in one line naming the file and the field."""

from __future__ import annotations

import dataclasses
import json

import pytest

from margin.errors import InputError
from margin.runfolder import read_run_record, write_run_record
from margin.runrecord import SAME_UNITS, SAME_VERDICTS
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare

#: A run.json as the version before the typed record wrote it (a limited, adaptive, sharded run).
EARLIER = {
    "dataset": {"name": "sample", "source": "margin/data/sample.csv", "sha256": "ab" * 32},
    "suite": {"name": "quick", "source": "margin/transforms/suites/quick.yaml", "sha256": "cd" * 32},
    "guard": {"id": "keyword", "family": "keyword", "checkpoint": "builtin", "revision": "1", "backend": "python",
              "template": "", "template_sha256": "", "threshold": None, "params": [["normalize", "none"]],
              "caveats": ["a toy"]},
    "budget": 100.0, "cost_norm": "corpus", "corpus_mean_length": 61.5, "search": "adaptive", "seed": 3,
    "limit": 10, "limit_sample": {"method": "stratified", "by_label": {"safe": 5, "unsafe": 5}},
    "shard": [1, 2], "protocol": "margin-adaptive-flip-cost/1", "max_calls": 64, "incumbents": None,
}


def written(folder, document) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(document, ensure_ascii=False) + "\n", encoding="utf-8")


@pytest.mark.parametrize("search", ["cheapest", "adaptive"])
def test_a_prepared_runs_record_round_trips_through_run_json(tmp_path, search):
    prepared = prepare(RunConfig(guard="keyword", dataset="sample", suite="quick", search=search, limit=6, seed=2))
    record = prepared.record
    assert record is prepared.record  # built once
    assert record.limit_sample is not None and record.guard == prepared.info
    write_run_record(tmp_path, record)
    assert read_run_record(tmp_path) == record
    assert json.loads((tmp_path / "run.json").read_text("utf-8")) == record.to_json()


def test_a_run_json_of_the_earlier_version_reads_and_rewrites_to_the_same_bytes(tmp_path):
    written(tmp_path / "old", EARLIER)
    record = read_run_record(tmp_path / "old")
    assert record.shard == (1, 2) and record.max_calls == 64 and record.limit_method == "stratified"
    write_run_record(tmp_path / "new", record)
    assert (tmp_path / "new" / "run.json").read_bytes() == (tmp_path / "old" / "run.json").read_bytes()
    bare = {k: v for k, v in EARLIER.items() if k not in ("limit_sample", "protocol", "max_calls", "incumbents")}
    written(tmp_path / "older", bare)  # before the sample and the protocol were recorded
    older = read_run_record(tmp_path / "older")
    assert older.limit_method == "first" and older.protocol is None
    assert older.to_json() == bare


def test_a_certified_adaptive_run_records_its_one_edit_mode_and_the_default_records_none(tmp_path):
    certified = prepare(RunConfig(guard="keyword", dataset="sample", suite="quick", search="adaptive",
                                  one_edit="all")).record
    guided = prepare(RunConfig(guard="keyword", dataset="sample", suite="quick", search="adaptive",
                               one_edit="guided")).record
    assert certified.one_edit == "all" and certified.to_json()["one_edit"] == "all"
    assert guided.one_edit is None and "one_edit" not in guided.to_json()  # as runs made before --one-edit
    # what "all" certifies: the typo-sized kinds, and every edit transform at every position
    edit_set = certified.to_json()["one_edit_set"]
    assert edit_set["typos"] == ["deletion", "substitution", "homoglyph", "swap", "insertion"]
    assert len(edit_set["transforms"]) >= 30 and "space-in-word" in edit_set["transforms"]
    assert list(certified.to_json())[-2:] == ["one_edit", "one_edit_set"]
    assert guided.one_edit_set is None and "one_edit_set" not in guided.to_json()  # its bytes as before
    write_run_record(tmp_path, certified)
    assert read_run_record(tmp_path) == certified
    assert guided.differences(certified) == ["one_edit", "one_edit_set"]
    # a certified run recorded before the set was said (no key) is not resumed as one that says it
    before = dataclasses.replace(certified, one_edit_set=None)
    assert before.differences(certified) == ["one_edit_set"]


def test_a_malformed_one_edit_set_is_refused_naming_it(tmp_path):
    written(tmp_path, {**EARLIER, "one_edit": "all", "one_edit_set": {"typos": ["deletion"], "transforms": [3]}})
    with pytest.raises(InputError, match="one_edit_set.transforms"):
        read_run_record(tmp_path)


def test_differences_name_the_fields_that_differ(tmp_path):
    written(tmp_path, EARLIER)
    record = read_run_record(tmp_path)
    other = dataclasses.replace(record, budget=50.0, seed=4)
    assert record.differences(other) == ["budget", "seed"]
    assert record.describe(other, ["budget"], "run.json has", "this command gives") == \
        "budget: run.json has 100.0, this command gives 50.0"
    described = dataclasses.replace(record, guard=dataclasses.replace(record.guard, caveats=(), scope="for tests"))
    assert record.differences(described) == ["guard"]  # a resume wants the identical guard
    assert record.differences(described, SAME_VERDICTS) == []  # descriptive fields change no verdict
    renamed = dataclasses.replace(record, guard=dataclasses.replace(record.guard, id="other"))
    assert record.differences(renamed, SAME_UNITS) == ["guard.id"]
    assert record.differences(dataclasses.replace(record, shard=None)) == ["shard"]


@pytest.mark.parametrize(("change", "field"), [
    ({"budget": "100"}, "budget"),
    ({"seed": 1.5}, "seed"),
    ({"dataset": {"name": "sample", "source": "margin/data/sample.csv"}}, "dataset.sha256"),
    ({"guard": {"family": "keyword"}}, "guard.id"),
    ({"guard": {**EARLIER["guard"], "params": [["normalize"]]}}, "guard.params"),
    ({"shard": [1]}, "shard"),
    ({"limit_sample": {"method": "stratified", "by_label": {"safe": "5"}}}, "limit_sample.by_label.safe"),
    ({"search": None}, "search"),
])
def test_a_malformed_field_is_one_error_naming_the_file_and_the_field(tmp_path, change, field):
    written(tmp_path, {**EARLIER, **change})
    with pytest.raises(InputError) as info:
        read_run_record(tmp_path)
    assert info.value.path == str(tmp_path / "run.json") and info.value.field == field
    assert "\n" not in str(info.value)


def test_what_is_not_a_run_json_object_is_refused(tmp_path):
    with pytest.raises(InputError, match="no run.json"):
        read_run_record(tmp_path)
    (tmp_path / "run.json").write_text("[1, 2]\n")
    with pytest.raises(InputError, match="expected a JSON object"):
        read_run_record(tmp_path)
    (tmp_path / "run.json").write_text('{"budget": ')
    with pytest.raises(InputError, match="invalid JSON"):
        read_run_record(tmp_path)


def test_merge_and_score_ask_the_record_and_name_the_field_that_differs(tmp_path):
    from margin.runs.recording.merge import merge_runs
    from margin.runs.recording.score import rescore

    written(tmp_path / "a", EARLIER)
    written(tmp_path / "b", {**EARLIER, "budget": 50.0, "shard": [2, 2]})
    with pytest.raises(InputError) as info:
        merge_runs([tmp_path / "a", tmp_path / "b"], tmp_path / "merged")
    assert info.value.path == str(tmp_path / "b" / "run.json") and "--budget" in info.value.message
    assert "budget: " in info.value.message and "shard" not in info.value.message  # parts differ in shard
    assert "\n" not in str(info.value) and not (tmp_path / "merged").exists()
    with pytest.raises(InputError, match=r"^.*b/run.json: budget differs from .*a/run.json \(50.0 vs 100.0\)"):
        rescore([tmp_path / "a", tmp_path / "b"])


#: Parameters named like an identity default whose literal is meant, with why.
NOT_IDENTITY = {
    "__init__.seed": "the engine Book's backoff jitter seed, not the transforms' seed",
    "ablate.search": "ablate's own default (exhaustive: per-family effectiveness), not a run's",
}


def test_what_decides_a_run_has_its_defaults_written_once():
    """dataset, suite, budget, search, seed, cost norm and max calls take their defaults from
    margin.runrecord; no other module writes a literal of its own."""
    import ast

    from tests.engine.test_settings import literal_defaults
    from tests.support.paths import REPO

    names = {"dataset", "suite", "budget", "search", "seed", "cost_norm", "max_calls"}
    home = REPO / "margin" / "runrecord.py"
    written = [f"{path.relative_to(REPO)}:{line}: {name}"
               for path in sorted((REPO / "margin").rglob("*.py")) if path != home
               for line, name in literal_defaults(ast.parse(path.read_text("utf-8")), names)
               if name not in NOT_IDENTITY]
    assert not written, "defaults written outside margin/runrecord.py:\n" + "\n".join(written)
