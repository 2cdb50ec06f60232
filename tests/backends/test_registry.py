"""The backend registry: one table says what each backend takes and whether it is remote, one
builder serves guards and study models, and no module outside margin/backends/ compares
backend names."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from pydantic import ValidationError

from margin.backends.registry import (
    BACKENDS,
    RUNTIME_OPTIONS,
    ChatSetup,
    UnknownBackend,
    backend_of,
)
from margin.engine.limits import LIMIT_OPTIONS, EndpointLimits
from margin.errors import InputError
from margin.guards.make import parse_guard_spec
from margin.studies.models import ChatModel, ModelSpec
from tests.support.cli import margin
from tests.support.paths import REPO

NAMES = set(BACKENDS)


def _names_a_backend(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_backend(e) for e in node.elts)
    return False


def backend_comparisons(source: str) -> list[int]:
    """Lines where a backend name is a string literal compared with something (`==`, `!=`,
    `in`, `not in`) or matched in a `case`."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source)) if _compares(node))


def _compares(node: ast.AST) -> bool:
    if isinstance(node, ast.Compare):
        return any(_names_a_backend(x) for x in (node.left, *node.comparators))
    return isinstance(node, ast.MatchValue) and _names_a_backend(node.value)


def test_the_check_finds_comparisons_of_backend_names():
    assert backend_comparisons('if spec.backend == "openai":\n    pass\n') == [1]
    assert backend_comparisons('x = b != "vllm"\ny = b in ("transformers", "x")\n') == [1, 2]
    assert backend_comparisons('match b:\n    case "openai":\n        pass\n') == [2]
    assert backend_comparisons('backend = "openai"\nok = backend_of(backend).remote\n') == []


def test_no_module_outside_backends_compares_backend_names():
    found = [f"{path.relative_to(REPO)}:{line}" for path in sorted((REPO / "margin").rglob("*.py"))
             if "backends" not in path.relative_to(REPO / "margin").parts[:1]
             for line in backend_comparisons(path.read_text("utf-8"))]
    assert not found, "ask margin.backends.registry instead of comparing backend names:\n" + "\n".join(found)


def test_each_backend_states_its_options_and_whether_it_is_remote():
    assert [b.name for b in BACKENDS.values() if b.remote] == ["openai"]
    openai = backend_of("openai")
    # The endpoint limits, with EndpointLimits' own defaults, are the remote backend's runtime options.
    assert {o.name for o in openai.options if o.runtime} == set(LIMIT_OPTIONS)
    assert openai.option("timeout_s").default == EndpointLimits().timeout_s
    # top_logprobs is a guard's (its scoring), not a study model's (plain generation).
    assert "top_logprobs" in openai.option_names(guard=True)
    assert "top_logprobs" not in openai.option_names(guard=False)
    assert backend_of("transformers").option_names(guard=False) == ("device", "dtype")
    assert backend_of("vllm").packages == ("vllm",) and not backend_of("vllm").remote
    assert {"device", "engine", "prefix_cache", *LIMIT_OPTIONS} == RUNTIME_OPTIONS
    with pytest.raises(UnknownBackend, match="unknown backend 'tgi'; expected one of transformers, vllm, openai"):
        backend_of("tgi")


def test_one_builder_for_guards_and_study_models():
    chat = backend_of("openai").build(ChatSetup("served-name", base_url="http://127.0.0.1:1/v1", top_logprobs=5))
    assert chat.remote and chat.model == "served-name" and chat.top_logprobs == 5
    model = ChatModel(ModelSpec(model="m", base_url="http://127.0.0.1:1/v1"), 8)
    assert model.remote and type(model.backend) is type(chat) and model.backend.top_logprobs == 0
    # A LoRA adapter loads on its base in process; a server names the adapter itself.
    setup = ChatSetup("org/adapter", "abc", lora_base="org/base")
    assert setup.weights() == ("org/base", None, "org/adapter")
    assert ChatSetup("org/model", "abc").weights() == ("org/model", "abc", None)


def test_model_specs_ask_the_registry():
    assert ModelSpec(backend="transformers", model="org/m@abc").checkpoint() == ("org/m", "abc")
    assert ModelSpec(model="served@name", base_url="http://x/v1").checkpoint() == ("served@name", None)
    assert ModelSpec(backend="vllm", model="m").cpus == 1.0 and ModelSpec(model="m", base_url="http://x/v1").cpus == 0
    with pytest.raises(ValidationError, match="unknown backend 'tgi'"):
        ModelSpec(backend="tgi", model="m")
    with pytest.raises(ValidationError, match="unknown backend option 'top_logprobs' for transformers"):
        ModelSpec(backend="transformers", model="m", backend_options={"top_logprobs": 3})


def test_bad_backend_and_backend_option_name_the_field(tmp_path):
    with pytest.raises(InputError) as caught:
        parse_guard_spec("llama-guard-4", backend="tgi")
    assert caught.value.field == "--backend" and "expected one of transformers, vllm, openai" in caught.value.message
    proc = margin("run", "--guard", "llama-guard-4", "--backend", "tgi", "--out", str(tmp_path / "never"))
    assert proc.returncode == 2 and "--backend" in proc.stderr and "unknown backend 'tgi'" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    path = tmp_path / "g.yaml"
    path.write_text("guard: llama-guard-4\nbackend: vllm\nbackend_options: {max_concurrency: 4}\n")
    proc = margin("run", "--guard", str(path), "--out", str(tmp_path / "never"))
    assert proc.returncode == 2 and f"{path}:3" in proc.stderr and "backend_options.max_concurrency" in proc.stderr
    assert "allowed: engine, top_logprobs" in proc.stderr and not (tmp_path / "never").exists()


def test_nothing_heavy_is_imported_to_parse_describe_or_build_a_remote_guard():
    code = ("import sys\nfrom margin.guards.make import build_guard, describe_guard, parse_guard_spec\n"
            "from margin.guards.presets import PRESETS\nfrom margin.studies.models import ChatModel, ModelSpec\n"
            "for name in PRESETS:\n    describe_guard(parse_guard_spec(name))\n"
            "build_guard(parse_guard_spec('llama-guard-4', backend='openai', base_url='http://127.0.0.1:1/v1'))\n"
            "ChatModel(ModelSpec(model='m', base_url='http://127.0.0.1:1/v1'), 8)\n"
            "print(sorted(m for m in ('vllm', 'torch', 'transformers') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"

