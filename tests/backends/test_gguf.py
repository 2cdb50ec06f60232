"""A GGUF file as a transformers guard's model, without loading one: the file's SHA-256 is
in the guard's identity and the verdict cache's key (another file under the same path is
another guard), a guard file names it beside itself, what cannot work is one line before
anything runs, and the packages transformers needs to read it are checked first.
(`test_gguf_smollm2.py` loads a real one.)"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from margin.errors import InputError
from margin.guards.make import describe_guard, parse_guard, parse_guard_spec
from margin.guards.weights import check_loadable
from margin.serving.verdict_cache import guard_key
from margin.studies.models import ModelSpec, identity_key, model_identity
from margin.util.hashing import sha256_bytes
from tests.support.cli import margin_env
from tests.support.paths import REPO

PRESET = "gpt-oss-safeguard-20b"


def gguf_file(path, content=b"GGUF\x03\x00\x00\x00 not a real model"):
    path.write_bytes(content)
    return path


def test_the_files_sha256_is_in_the_identity_and_the_cache_key(tmp_path):
    model = gguf_file(tmp_path / "small.Q4_1.gguf")
    info = describe_guard(parse_guard_spec(PRESET, model=str(model)))
    params = dict(info.params)
    assert params["gguf_sha256"] == sha256_bytes(model.read_bytes())
    assert info.revision == f"sha256:{params['gguf_sha256'][:16]}"
    assert info.checkpoint == str(model) and info.backend == "transformers"
    assert not any("revision not pinned" in c for c in info.caveats)  # the content pins it
    assert any("GGUF" in c for c in info.caveats)
    assert info.id.startswith(f"{PRESET}~")
    # Other weights under the same name: another id and another verdict-cache key.
    gguf_file(model, b"GGUF\x03\x00\x00\x00 other weights, same name")
    other = describe_guard(parse_guard_spec(PRESET, model=str(model)))
    assert dict(other.params)["gguf_sha256"] == sha256_bytes(model.read_bytes()) != params["gguf_sha256"]
    assert other.id != info.id and guard_key(other) != guard_key(info)
    # With the same declared id, the cache key still tells the two files apart.
    named = [describe_guard(parse_guard_spec(PRESET, model=str(model), id="smol")) for _ in range(2)]
    assert named[0] == named[1] and named[0].id == "smol"
    gguf_file(model)
    assert guard_key(describe_guard(parse_guard_spec(PRESET, model=str(model), id="smol"))) != guard_key(named[0])


def test_guards_without_a_gguf_file_keep_their_identity(tmp_path):
    for overrides in ({}, {"model": str(tmp_path)}, {"backend": "openai", "base_url": "http://127.0.0.1:9/v1",
                                                      "model": "SmolLM2-135M-Instruct.Q4_1.gguf"}):
        info = describe_guard(parse_guard_spec(PRESET, **overrides))
        assert "gguf_sha256" not in dict(info.params)
    # A server's served name may end in .gguf (llama-server serves the file's name): no file is read.
    served = describe_guard(parse_guard_spec(PRESET, backend="openai", base_url="http://127.0.0.1:9/v1",
                                             model="/nowhere/x.gguf"))
    assert served.checkpoint == "/nowhere/x.gguf" and served.revision == "main"
    assert describe_guard(parse_guard_spec(PRESET)).id == PRESET


def test_a_guard_file_names_its_gguf_file_beside_itself(tmp_path):
    folder = tmp_path / "guards"
    folder.mkdir()
    model = gguf_file(folder / "smol.gguf")
    (folder / "smol.yaml").write_text(f"guard: {PRESET}\nid: smol\nmodel: smol.gguf\noptions: {{max_new_tokens: 8}}\n")
    spec = parse_guard(str(folder / "smol.yaml"), {})
    assert spec.model == str(model)
    assert dict(describe_guard(spec).params)["gguf_sha256"] == sha256_bytes(model.read_bytes())


@pytest.mark.parametrize(("overrides", "field", "words"), [
    ({"model": "{dir}/absent.gguf"}, "--model", "no such GGUF file"),
    ({"model": "{file}", "backend": "vllm"}, "--backend", "does not load a GGUF file; use --backend transformers"),
    ({"model": "{file}@abc123"}, "revision", "takes no revision"),
])
def test_what_cannot_load_a_gguf_file_is_one_line(tmp_path, overrides, field, words):
    model = gguf_file(tmp_path / "m.gguf")
    given = {k: v.format(dir=tmp_path, file=model) for k, v in overrides.items()}
    with pytest.raises(InputError) as caught:
        parse_guard_spec(PRESET, **given)
    assert caught.value.field == field and words in caught.value.message


def test_the_gguf_packages_are_checked_before_anything_loads(tmp_path, monkeypatch):
    model = gguf_file(tmp_path / "m.gguf")
    spec = parse_guard_spec(PRESET, model=str(model))
    info = describe_guard(spec)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a))
    with pytest.raises(InputError) as caught:
        check_loadable(spec, info)
    assert "needs gguf, which is not installed" in caught.value.message
    assert "pip install" in caught.value.message and "accelerate" in caught.value.message
    monkeypatch.setattr(importlib.util, "find_spec", real)
    check_loadable(spec, info)  # installed here: nothing to say, and no hub is asked


def test_margin_run_without_gguf_installed_is_one_line_and_exit_2(tmp_path):
    """The real command, in a process where `gguf` cannot be found (sys.modules[name] = None)."""
    model = gguf_file(tmp_path / "m.gguf")
    out = tmp_path / "run"
    argv = ["margin", "run", "--guard", PRESET, "--model", str(model), "--suite", "quick", "--limit", "4",
            "--engine", "local", "--out", str(out)]
    code = ("import runpy, sys; sys.modules['gguf'] = None; "
            f"sys.argv = {argv!r}; runpy.run_module('margin', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env=margin_env(), timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "needs gguf, which is not installed" in lines[0] and "pip install 'margin[hf]'" in lines[0]
    assert not out.exists()


def test_a_study_model_from_a_gguf_file_keys_its_responses_on_the_content(tmp_path):
    model = gguf_file(tmp_path / "m.gguf")
    spec = ModelSpec(backend="transformers", model=str(model))
    first = model_identity(spec, 64)
    assert first["gguf_sha256"] == sha256_bytes(model.read_bytes())
    gguf_file(model, b"GGUF other")
    assert identity_key(model_identity(spec, 64)) != identity_key(first)
    served = model_identity(ModelSpec(model="smol.gguf", base_url="http://127.0.0.1:9/v1"), 64)
    assert "gguf_sha256" not in served
    with pytest.raises(ValueError, match="no such GGUF file"):
        ModelSpec(backend="transformers", model=str(tmp_path / "absent.gguf"))
    assert json.dumps(first)  # plain JSON, as the response cache stores it
