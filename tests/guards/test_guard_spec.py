"""Guard specs: presets, CLI overrides, guard files and their errors, the guards list."""

from __future__ import annotations

import json
import pickle

import pytest

from margin.errors import InputError
from margin.guards.make import build_guard, describe_guard, parse_guard, parse_guard_spec
from margin.guards.presets import PRESETS
from margin.guards.spec import GuardSpec
from tests.support.cli import margin

ISSUE_FAMILIES = {"llama-guard", "shieldgemma", "wildguard", "granite-guardian", "qwen3guard-gen", "nemoguard",
                  "gpt-oss-safeguard", "sequence-classifier", "openai-moderation", "mistral-moderation"}


def test_every_family_has_presets_and_describes_without_loading_a_model():
    assert {p.family for p in PRESETS.values()} == ISSUE_FAMILIES
    for name in PRESETS:
        info = describe_guard(parse_guard_spec(name))
        assert info.id == name and info.checkpoint and info.revision and info.template_sha256
        assert len(info.template_sha256) == 64


def test_specs_pickle_and_overrides_change_identity():
    spec = parse_guard_spec("llama-guard-4")
    assert pickle.loads(pickle.dumps(spec)) == spec
    base = describe_guard(spec)
    moved = describe_guard(parse_guard_spec("llama-guard-4", threshold=0.3))
    assert moved.id == "llama-guard-4@t0.3" and moved.threshold == 0.3  # the threshold, readable
    tuned = describe_guard(parse_guard_spec("llama-guard-4", threshold=0.3, backend="openai",
                                            base_url="http://127.0.0.1:9/v1"))
    assert tuned.id.startswith("llama-guard-4@t0.3~")  # other settings: a digest
    runtime = describe_guard(GuardSpec(name="llama-guard-4", replicas=4, num_gpus=1.0,
                                       backend_options={"device": "cuda:1"}))
    assert runtime == base  # runtime fields never enter identity
    served = describe_guard(parse_guard_spec("llama-guard-4", backend="openai", base_url="http://127.0.0.1:9/v1",
                                             api_key_env="SOME_KEY"))
    assert served.backend == "openai" and dict(served.params)["base_url"] == "http://127.0.0.1:9/v1"
    pinned = describe_guard(parse_guard_spec("llama-guard-3-8b", model="my/finetune@abc123"))
    assert (pinned.checkpoint, pinned.revision) == ("my/finetune", "abc123")
    other = describe_guard(parse_guard_spec("llama-guard-3-1b", model="/local/copy"))
    assert other.revision == "main"  # the preset's commit belongs to the preset's checkpoint


def test_attack_detectors_and_controversial_say_so():
    assert any("not harm" in c for c in describe_guard(parse_guard_spec("prompt-guard-2-86m")).caveats)
    assert any("Controversial counted as unsafe" in c for c in describe_guard(parse_guard_spec("qwen3guard-gen-4b")).caveats)
    loose = describe_guard(parse_guard_spec("qwen3guard-gen-4b").model_copy(update={"options": {"controversial": "safe"}}))
    assert any("as safe" in c for c in loose.caveats)


@pytest.mark.parametrize(("text", "overrides", "field"), [
    ("llama-guard-4", {"backend": "tensorrt"}, "--backend"),
    ("prompt-guard-2-86m", {"backend": "vllm"}, "--backend"),
    ("llama-guard-4", {"backend": "openai"}, "--base-url"),
    ("llama-guard-4", {"base_url": "http://x"}, "--base-url"),
    ("llama-guard-4", {"threshold": 1.5}, "--threshold"),
    ("openai-moderation", {"api_key_env": "sk-not-a-name!"}, "--api-key-env"),
    ("keyword", {"threshold": 0.5}, "--threshold"),
    ("minilm", {"backend": "openai"}, "--backend"),
    ("lama-guard-4", {}, "--guard"),
])
def test_bad_specs_name_the_flag(text, overrides, field):
    with pytest.raises(InputError) as caught:
        parse_guard_spec(text, **overrides)
    assert caught.value.field == field


def test_guard_file_round_trip(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("guard: qwen3guard-gen-4b\nid: qwen-loose\nbackend: openai\nbase_url: http://127.0.0.1:1/v1\n"
                    "options:\n  controversial: safe\nbackend_options: {max_concurrency: 4}\nreplicas: 2\n")
    spec = parse_guard_spec(str(path), threshold=0.4)
    assert spec.name == "qwen3guard-gen-4b" and spec.replicas == 2 and spec.threshold == 0.4
    info = describe_guard(spec)
    assert info.id == "qwen-loose" and info.backend == "openai"


@pytest.mark.parametrize(("body", "line", "field"), [
    ("guard: wildguard\nbackend: openai\nbase_url: http://x/v1\nthreshhold: 0.5\n", 4, "threshhold"),
    ("guard: wildguard\nthreshold: high\n", 2, "threshold"),
    ("guard: qwen3guard-gen-4b\noptions:\n  controversial: maybe\n", 3, "options.controversial"),
    ("guard: llama-guard-4\noptions:\n  colour: red\n", 3, "options.colour"),
    ("guard: wildguard\nbackend: openai\n", 2, "base_url"),
    ("guard: wildgaurd\n", 1, "guard"),
    ("id: x\n", 1, "guard"),
    ("guard: wildguard\nreplicas: 0\n", 2, "replicas"),
    ("guard: wildguard\nbackend: openai\nbase_url: http://x/v1\nbackend_options: {speed: 3}\n", 4,
     "backend_options.speed"),
])
def test_guard_file_errors_name_line_and_field(tmp_path, body, line, field):
    path = tmp_path / "g.yaml"
    path.write_text(body)
    with pytest.raises(InputError) as caught:
        parse_guard_spec(str(path))
    assert (caught.value.path, caught.value.line, caught.value.field) == (str(path), line, field)


def test_guard_file_bad_yaml_and_cli_exit_2(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("guard: [wildguard\n")
    with pytest.raises(InputError) as caught:
        parse_guard_spec(str(path))
    assert caught.value.line is not None
    path.write_text("guard: llama-guard-4\noptions:\n  colour: red\n")
    proc = margin("run", "--guard", str(path), "--out", str(tmp_path / "never"))
    assert proc.returncode == 2 and f"{path}:3" in proc.stderr and "options.colour" in proc.stderr
    assert not (tmp_path / "never").exists()


def test_one_parser_for_the_cli_guard_files_and_study_entries(tmp_path):
    (tmp_path / "g.yaml").write_text("guard: wildguard\nbackend: openai\nbase_url: http://x/v1\nrevision: old\n")
    cli = parse_guard_spec(str(tmp_path / "g.yaml"), model="org/wg@new")
    study_file = parse_guard("g.yaml", {"model": "org/wg@new"}, tmp_path)  # relative to the config's folder
    study_entry = parse_guard("wildguard", {"backend": "openai", "base_url": "http://x/v1", "model": "org/wg@new"})
    assert cli == study_file == study_entry
    assert (cli.model, cli.revision) == ("org/wg", "new")  # REPO@REV given over the file pins its revision
    with pytest.raises(InputError) as caught:
        parse_guard("missing.yaml", {}, tmp_path)
    assert caught.value.field == "--guard" and str(tmp_path / "missing.yaml") in caught.value.message


def test_relative_python_guard_in_a_guard_file(tmp_path):
    (tmp_path / "mine.py").write_text("class G:\n    def classify(self, texts):\n        return ['safe'] * len(texts)\n")
    (tmp_path / "g.yaml").write_text("guard: python:mine.py:G\nmax_batch_size: 7\n")
    guard = build_guard(parse_guard_spec(str(tmp_path / "g.yaml")))
    assert guard.max_batch_size == 7 and guard.classify(["a"])[0].label == "safe"


def test_guards_list_json_has_presets_with_semantics():
    rows = {r["name"]: r for r in json.loads(margin("guards", "list", "--json").stdout)}
    assert {"keyword", "minilm", "llama-guard-4", "shieldgemma-2b", "wildguard", "openai-moderation"} <= set(rows)
    lg4 = rows["llama-guard-4"]
    assert lg4["family"] == "llama-guard" and lg4["checkpoint"] == "meta-llama/Llama-Guard-4-12B"
    assert set(lg4["backends"]) == {"transformers", "vllm", "openai"} and lg4["default_backend"] == "transformers"
    assert "attack" in rows["prompt-guard-2-86m"]["labels"] and rows["prompt-guard-2-86m"]["backends"] == ["transformers"]
    assert all(r["labels"] for r in rows.values())
    # the case shapes each guard takes (docs/guards.md#case-shapes)
    text = {"targets": ["prompt", "response"], "conversation": True, "policy": False, "sees": "target text",
            "system": True, "context": False}
    assert rows["keyword"]["shapes"] == rows["minilm"]["shapes"] == text
    exchange = {"targets": ["prompt", "response"], "conversation": False, "policy": True, "sees": "whole case",
                "system": True, "context": False}
    assert rows["shieldgemma-2b"]["shapes"] == rows["granite-guardian-3.2-5b"]["shapes"] == exchange
    assert rows["granite-guardian-3.3-8b"]["shapes"] == {**exchange, "conversation": True, "system": False,
                                                         "context": True}
    assert rows["qwen3guard-gen-4b"]["shapes"] == {**exchange, "conversation": True, "policy": False,
                                                   "system": False}
    assert all(set(r["shapes"]) == set(text) for r in rows.values())


def test_max_outage_in_a_guard_file_is_a_runtime_limit_not_identity(tmp_path):
    from margin.engine.limits import EndpointLimits

    path = tmp_path / "g.yaml"
    base = "guard: llama-guard-4\nbackend: openai\nbase_url: http://127.0.0.1:1/v1\n"
    path.write_text(base + "backend_options: {max_outage_s: 10m}\n")
    spec = parse_guard_spec(str(path))
    assert EndpointLimits.from_options(spec.backend_options).max_outage_s == 600.0
    assert EndpointLimits.from_options({"max_outage_s": 45}).max_outage_s == 45.0
    plain = tmp_path / "plain.yaml"
    plain.write_text(base)
    assert describe_guard(spec).id == describe_guard(parse_guard_spec(str(plain))).id
