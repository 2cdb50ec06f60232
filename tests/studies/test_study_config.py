"""Study configs: every malformed one gets one error naming file, line and field; exit 2, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from margin.errors import InputError
from margin.studies.plan import plan_study
from tests.support.paths import REPO
from tests.support.study import study_config, write_config

URL = "http://127.0.0.1:9/v1"  # never called: validation runs before anything else


def good_text() -> str:
    return yaml.safe_dump(study_config(URL, second_judge="toy-judge-lenient"), sort_keys=False)


def line_of(text: str, needle: str, nth: int = 1) -> int:
    """1-based line of the nth line holding `needle`."""
    hits = [i for i, line in enumerate(text.splitlines(), start=1) if needle in line]
    return hits[nth - 1]


def test_the_good_config_prepares_without_writing_anything(tmp_path):
    path = write_config(tmp_path, yaml.safe_load(good_text()))
    before = set(tmp_path.iterdir())
    plan = plan_study(path)
    assert [t.name for t in plan.transformations] == ["zero-width-space:100%"]
    assert len(plan.prompts) == 12 and [j.id for j in plan.judges][1] == "second"
    assert set(tmp_path.iterdir()) == before


# (replace this, with that, the error's field, the text on the error's line, message part)
CASES = [
    ("capability_index: 8", "capability_index: -1", "models[0].capability_index", "capability_index", "greater than"),
    ("parameters_b: 4", "paramters_b: 4", "models[0].paramters_b", "paramters_b", "did you mean parameters_b"),
    ("  name: toy-medium\n", "", "models[0].name", "- id: toy-medium", "required"),
    ("  model: toy-medium\n", "  model: toy-medium\n  temperature: 0.7\n", "models[0].temperature",
     "temperature", "unknown field"),
    ("  backend: openai\n  model: toy-medium\n", "  backend: vllm\n  model: toy-medium\n", "models[0]",
     "- id: toy-medium", "base_url needs backend: openai"),
    ("  backend: openai\n  model: toy-medium\n", "  backend: tgi\n  model: toy-medium\n", "models[0].backend",
     "backend: tgi", "unknown backend 'tgi'; expected one of transformers, vllm, openai"),
    ("  backend_options:\n    max_attempts: 1", "  backend_options:\n    top_logprobs: 1", "models[0]",
     "- id: toy-medium", "unknown backend option 'top_logprobs' for openai"),
    ("guards:\n- keyword", "guards:\n- guard: llama-guard-4\n  backend: tgi", "guards[0].backend", "backend: tgi",
     "unknown backend 'tgi'"),
    ("guards:\n- keyword", "guards:\n- guard: llama-guard-4\n  backend_options:\n    speed: 3",
     "guards[0].backend_options.speed", "speed: 3", "unknown backend option 'speed' for transformers"),
    ("strength: 100%", "strength: 100 percent", "transformations[0].strength", "strength:", "unknown strength"),
    ("transform: zero-width-space", "transform: zero-width-spice", "transformations[0].transform",
     "zero-width-spice", "did you mean zero-width-space"),
    ("transform: zero-width-space\n  strength: 100%", "transform: zero-width-space", "transformations[0]",
     "zero-width-space", "add `strength`"),
    ("strength: 100%", "strength: '@*'", "transformations[0].strength", "strength:", "per word"),
    ("guards:\n- keyword", "guards:\n- llama-gard-4", "guards[0]", "llama-gard-4", "did you mean llama-guard-4"),
    ("guards:\n- keyword", "guards:\n- guard: keyword\n  threshold: 0.3", "guards[0].threshold", "threshold",
     "takes no threshold"),
    ("guards:\n- keyword", "guards:\n- guard: minilm\n  threshhold: 0.3", "guards[0].threshhold", "threshhold",
     "did you mean threshold"),
    ("guards:\n- keyword", "guards:\n- guard: python:g.py:G\n  weights: none.json", "guards[0].weights",
     "weights", "no such weights file"),
    ("guards:\n- keyword", "guards:\n- guard: llama-guard-4\n  backend: openai\n  replicas: 0",
     "guards[0].replicas", "replicas", "at least 1"),
    ("guards:\n- keyword", "guards:\n- guard: missing.yaml", "guards[0].guard", "missing.yaml", "no such guard file"),
    ("- s13", "- s99", "prompts.ids[3]", "s99", "no prompt 's99'"),
    ("template: behaviour\n", "template: behavior\n", "judge.template", "behavior", "did you mean behaviour"),
    ("runtime:", "thresholds:\n  evasion: 1.2\nruntime:", "thresholds.evasion", "evasion: 1.2", "less than"),
    ("runtime:", "generation:\n  greedy: false\nruntime:", "generation.greedy", "greedy", "True"),
    ("runtime:", "seed: 1\nseed: 2\nruntime:", "seed", "seed: 2", "duplicate key"),
    ("dataset: sample", "dataset: prompts.csv", "dataset", "dataset:", "no such dataset"),
    ("name: test", "name: my study", "name", "name: my study", "letters, digits"),
    ("  api_key_env", "  api_key_env", "", "", ""),  # placeholder, replaced below
]
CASES[-1] = ("  model: toy-medium\n", "  model: toy-medium\n  api_key_env: MARGIN_TEST_UNSET_KEY\n",
             "models[0].api_key_env", "api_key_env", "MARGIN_TEST_UNSET_KEY is not set")


@pytest.mark.parametrize("old, new, field, needle, message", CASES, ids=[c[2] or "x" for c in CASES])
def test_each_mistake_names_its_field_and_line(tmp_path, old, new, field, needle, message):
    text = good_text()
    assert old in text, old
    bad = text.replace(old, new, 1)
    path = tmp_path / "study.yaml"
    path.write_text(bad, encoding="utf-8")
    with pytest.raises(InputError) as caught:
        plan_study(path)
    error = caught.value
    assert error.path == str(path)
    assert error.field == field
    assert error.line == line_of(bad, needle)
    assert message in error.message


def test_yaml_syntax_errors_and_non_mappings_name_the_line(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text("name: x\nguards: [keyword\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        plan_study(path)
    assert caught.value.line == 3 and "not valid YAML" in caught.value.message
    path.write_text("- just a list\n", encoding="utf-8")
    with pytest.raises(InputError, match="is a mapping"):
        plan_study(path)


def test_second_judge_must_differ_from_the_first(tmp_path):
    config = study_config(URL)
    config["second_judge"] = dict(config["judge"])
    with pytest.raises(InputError) as caught:
        plan_study(write_config(tmp_path, config))
    assert caught.value.field == "second_judge"


def test_the_cli_exits_2_and_writes_nothing(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(good_text().replace("capability_index: 8", "capability_index: high"), encoding="utf-8")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "margin", "study", str(path), "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "[models[0].capability_index]" in proc.stderr
    assert f"study.yaml:{line_of(path.read_text(), 'capability_index')}" in proc.stderr
    assert not out.exists()
    assert {p.name for p in tmp_path.iterdir()} == {"study.yaml"}


def test_resume_needs_a_matching_study_folder(tmp_path):
    from margin.studies.runner import check_out_dir

    plan = plan_study(write_config(tmp_path, study_config(URL)))
    with pytest.raises(InputError, match="no study.json"):
        check_out_dir(plan, tmp_path / "none", resume=True)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("x")
    with pytest.raises(InputError, match="not empty"):
        check_out_dir(plan, tmp_path / "used", resume=False)
    from margin.runfolder import dumps

    manifest = plan.record().to_json()
    manifest["seed"] = 7
    (tmp_path / "used" / "study.json").write_text(dumps(manifest) + "\n")
    with pytest.raises(InputError, match=r"changed since the study began \(seed\)"):
        check_out_dir(plan, tmp_path / "used", resume=True)
    assert Path(tmp_path / "used" / "x").read_text() == "x"


def test_study_guards_take_the_guard_file_keys_through_the_same_parser(tmp_path):
    """Relative python: and weights paths from the config's folder; a threshold tags the id;
    scope and caveats reach the guard's identity."""
    (tmp_path / "g.py").write_text("class G:\n    def __init__(self, weights):\n        self.w = weights.read_text()\n"
                                   "    def classify(self, texts):\n        return ['safe'] * len(texts)\n")
    (tmp_path / "w.json").write_text("{}")
    guards = [{"guard": "python:g.py:G", "weights": "w.json", "revision": "2", "scope": "attack detector"},
              {"guard": "minilm", "threshold": 0.6, "caveats": "a caveat"}]
    config = {**yaml.safe_load(good_text()), "guards": guards}
    plan = plan_study(write_config(tmp_path, config))
    mine, minilm = (g.input.info for g in plan.guards)
    assert (mine.id, mine.scope, mine.revision.split("+")[0]) == ("python:g.py:G", "attack detector", "2")
    assert dict(mine.params)["weights"] == "w.json" and len(dict(mine.params)["weights_sha256"]) == 64
    assert minilm.id == "minilm@t0.6" and minilm.caveats[-1] == "a caveat"


def test_the_gpu_cluster_example_is_a_valid_config(xstest_csv, monkeypatch):
    monkeypatch.setenv("MARGIN_XSTEST", str(xstest_csv))
    plan = plan_study(REPO / "studies" / "gpu-cluster.yaml", servers=False)  # its hosts are placeholders
    assert len(plan.prompts) == 450 and plan.guards[0].id == "llama-guard-4-vllm"
    assert plan.guards[0].input.info.family == "llama-guard" and plan.guards[0].input.info.backend == "openai"
    assert {m.metadata.creator for m in plan.models} == {"Alibaba", "Google", "IBM"}
    assert [j.id for j in plan.judges] == ["qwen3.5-27b-judge", "gemma-4-31b-judge"]
    assert len(plan.transformations) > 6  # the listed six and the quick suite's fixed strengths


def test_study_modules_do_not_import_heavy_frameworks():
    code = ("import sys, margin.studies.runner, margin.studies.plan, margin.judges.llm; "
            "print([m for m in ('torch', 'transformers', 'vllm', 'ray') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "[]"


def test_prompts_limit_is_the_stratified_sample_margin_run_draws_and_is_recorded(tmp_path):
    """The sample's first 24 prompts are all safe: the first 10 would hold no unsafe prompt."""
    from margin.datasets import load_dataset
    from margin.runs.preparing.subset import limit_prompts

    def plan_of(prompts, seed=0):
        return plan_study(write_config(tmp_path, study_config(URL, prompts=prompts, seed=seed)))

    everything = load_dataset("sample").prompts
    plan = plan_of({"limit": 10})
    assert plan.prompts == limit_prompts(everything, 10, 0)  # as `margin run --limit 10 --seed 0`
    assert sum(p.label == "unsafe" for p in plan.prompts) == 5
    assert plan.record().to_json()["limit_sample"] == {"method": "stratified", "by_label": {"safe": 5, "unsafe": 5}}
    assert plan_of({"limit": 10}, seed=1).prompts != plan.prompts  # drawn with the study's seed
    unsafe = [p for p in everything if p.label == "unsafe"]
    assert plan_of({"labels": ["unsafe"], "limit": 4}).prompts == limit_prompts(unsafe, 4, 0)  # after the filters
    assert "limit_sample" not in plan_of({"limit": 48}).record().to_json()  # nothing left out, nothing sampled
    assert "limit_sample" not in plan_of({}).record().to_json()


def test_a_study_begun_when_limit_took_the_first_prompts_says_how_to_resume_it(tmp_path):
    from margin.runfolder import dumps
    from margin.studies.runner import check_out_dir

    plan = plan_study(write_config(tmp_path, study_config(URL, prompts={"limit": 10})))
    old = {k: v for k, v in plan.record().to_json().items() if k != "limit_sample"}
    old["prompts"] = ["s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10"]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "study.json").write_text(dumps(old) + "\n")
    with pytest.raises(InputError, match=r"\(limit_sample, prompts\); it took the first prompts.limit prompts: "
                                         r"list them as prompts.ids, with no limit, to resume it"):
        check_out_dir(plan, tmp_path / "old", resume=True)


def test_the_real_small_example_is_a_valid_config():
    """studies/real-small.yaml (tests/real/ runs it on llama-server): SmolLM2 as guard, model and judge."""
    plan = plan_study(REPO / "studies" / "real-small.yaml", servers=False)  # no server needed to check it
    assert len(plan.prompts) == 4 and [g.id for g in plan.guards] == ["smollm2-prompted"]
    assert plan.guards[0].input.info.family == "prompted" and [m.id for m in plan.models] == ["smollm2"]
    assert plan.judges[0].model is not None and "json_schema" in plan.judges[0].model.spec.request_options
