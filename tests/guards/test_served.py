"""What a server says it serves becomes part of a guard's identity (issue 31, item 2): the
served name must be listed, llama.cpp's model file, chat template, build and defaults and
vLLM's model root go into the facts, and the facts into the guard's id, revision and cache
key. These tests read recorded bodies (pure); tests/real/ asks a real llama-server."""

from __future__ import annotations

import pytest

from margin.backends.served import NotServed, root_url, server_facts, states_model
from margin.errors import InputError
from margin.guards.make import describe_guard, parse_guard_spec
from margin.serving.verdict_cache import guard_key

MODELS = {"object": "list", "data": [{"id": "smollm2", "aliases": ["smol"], "object": "model", "created": 1,
                                      "owned_by": "llamacpp", "meta": {"n_params": 134515008, "size": 98, "n_ctx": 2048}}]}
PROPS = {"model_path": "/models/SmolLM2-135M-Instruct.Q4_1.gguf", "chat_template": "{{ messages }}",
         "build_info": "b1-abc", "total_slots": 2,
         "default_generation_settings": {"n_ctx": 2048, "params": {"temperature": 0.8, "top_k": 40}}}
SETTINGS = {"generation_settings": {"temperature": 0.0, "n_predict": 1, "grammar": "", "stop": []}}


def facts(**changes):
    props = {**PROPS, **changes.pop("props", {})}
    settings = {"generation_settings": {**SETTINGS["generation_settings"], **changes.pop("settings", {})}}
    return dict(server_facts("smollm2", "http://h/v1", changes.pop("models", MODELS), props, settings))


def test_llama_cpp_facts_name_the_file_template_build_and_defaults():
    found = facts()
    assert found["server.kind"] == "llama.cpp"
    assert found["server.model_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"  # the file, not the local folder
    assert found["server.build"] == "b1-abc" and len(found["server.chat_template_sha256"]) == 64
    assert "n_ctx" not in found["server.model_meta"] and "created" not in str(found)  # nothing volatile
    assert "server.grammar_sha256" not in found
    assert states_model(tuple(found.items()))


@pytest.mark.parametrize("change", [
    {"props": {"model_path": "/models/other.gguf"}},
    {"props": {"chat_template": "{{ other }}"}},
    {"props": {"build_info": "b2-def"}},
    {"props": {"default_generation_settings": {"params": {"temperature": 0.8, "top_k": 1}}}},
    {"settings": {"grammar": 'root ::= "0" | "1"'}},  # a server-wide --grammar: only a request shows it
    {"settings": {"stop": ["\n"]}},
])
def test_every_fact_that_can_change_a_reply_changes_the_facts(change):
    assert facts(**change) != facts()


def test_what_only_the_probe_request_sets_and_the_slot_context_do_not():
    models = {"data": [{**MODELS["data"][0], "created": 2, "meta": {**MODELS["data"][0]["meta"], "n_ctx": 4096}}]}
    assert facts(models=models, settings={"n_predict": 7}, props={"total_slots": 8}) == facts()


def test_a_name_the_server_does_not_serve_is_one_error_naming_those_it_does():
    with pytest.raises(NotServed) as caught:
        server_facts("llama", "http://h/v1", MODELS, PROPS, SETTINGS)
    assert "'smollm2', 'smol'" in str(caught.value) and "'llama'" in str(caught.value)
    assert isinstance(caught.value, InputError)
    assert dict(server_facts("smol", "http://h/v1", MODELS, PROPS, SETTINGS))["server.kind"] == "llama.cpp"


def test_vllm_states_its_root_and_a_server_without_models_states_nothing():
    vllm = {"data": [{"id": "guard", "owned_by": "vllm", "root": "meta-llama/Llama-Guard-4-12B", "max_model_len": 8192,
                      "created": 5, "permission": [{"id": "x"}]}]}
    found = dict(server_facts("guard", "http://h/v1", vllm, None, None, {"version": "0.11.0"}))
    assert found == {"server.kind": "vllm", "server.model_root": "meta-llama/Llama-Guard-4-12B",
                     "server.max_model_len": "8192", "server.owned_by": "vllm", "server.version": "0.11.0"}
    assert server_facts("guard", "http://h/v1", None) == ()
    assert root_url("http://h:8/v1/") == "http://h:8"


def test_facts_go_into_the_id_the_revision_and_the_cache_key_with_no_pin_caveat():
    spec = parse_guard_spec("llama-guard-3-8b", backend="openai", base_url="http://h/v1", model="smollm2")
    bare = describe_guard(spec)
    served = describe_guard(spec.model_copy(update={"served": tuple(sorted(facts().items()))}))
    other = describe_guard(spec.model_copy(update={"served": tuple(sorted(facts(props={"build_info": "b2"}).items()))}))
    assert bare.id != served.id != other.id and served.id.startswith("llama-guard-3-8b~")
    assert len({guard_key(bare), guard_key(served), guard_key(other)}) == 3
    assert served.revision.startswith("served:") and not any("pin" in c for c in served.caveats)
    assert any("pin" in c for c in bare.caveats)
    assert dict(served.params)["server.model_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_a_guard_file_cannot_state_what_its_server_serves(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("guard: llama-guard-3-8b\nbackend: openai\nbase_url: http://h/v1\nserved: [[a, b]]\n")
    with pytest.raises(InputError) as caught:
        parse_guard_spec(str(path))
    assert caught.value.field == "served" and caught.value.line == 4
