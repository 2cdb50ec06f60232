"""Issue 36, item 1: one validated guard spec. An override given through the API (a GuardSpec
with `RunConfig`'s fields, as `margin.run(spec, threshold=...)` passes them) is accepted or
refused exactly as the same flag on the command line is, with the same error."""

from __future__ import annotations

import pytest

from margin.errors import InputError
from margin.guards.make import parse_guard_spec
from margin.runs.preparing.config import RunConfig

# (guard, override field, value): each override, once accepted and once refused where it can be.
CASES = [
    ("llama-guard-3-1b", "threshold", 0.3),
    ("llama-guard-3-1b", "threshold", 7.0),
    ("llama-guard-3-1b", "threshold", -0.1),
    ("minilm", "threshold", 0.6),
    ("keyword", "threshold", 0.5),
    ("llama-guard-3-1b", "backend", "openai"),
    ("llama-guard-3-1b", "backend", "tgi"),
    ("keyword", "backend", "transformers"),
    ("llama-guard-3-1b", "model", "my/fine-tune@abc123"),
    ("keyword", "model", "x"),
    ("llama-guard-3-1b", "base_url", "http://127.0.0.1:8000/v1"),
    ("minilm", "base_url", "http://127.0.0.1:8000/v1"),
    ("llama-guard-3-1b", "api_key_env", "MY_KEY"),
    ("llama-guard-3-1b", "api_key_env", "sk-not-a-variable-name!"),
    ("keyword", "normalize", "nfkc+skeleton"),
    ("keyword", "normalize", "nfkd"),
]


def outcome(make):  # type: ignore[no-untyped-def]
    try:
        return "ok", make().model_dump()
    except InputError as exc:
        return "refused", (str(exc), exc.field)


@pytest.mark.parametrize(("guard", "field", "value"), CASES)
def test_the_api_and_the_command_line_accept_and_refuse_an_override_alike(guard, field, value):
    # A server's URL and key variable need a remote backend; minilm is refused either way.
    extra = {"backend": "openai"} if field in ("base_url", "api_key_env") and guard != "minilm" else {}
    cli = outcome(lambda: parse_guard_spec(guard, **{field: value, **extra}))
    api = outcome(lambda: RunConfig.of(guard=parse_guard_spec(guard), **{field: value, **extra}).guard_spec())
    assert api == cli


def test_the_hole_is_closed_a_threshold_of_7_is_refused_through_the_api():
    config = RunConfig(guard=parse_guard_spec("llama-guard-3-1b"), threshold=7.0)
    with pytest.raises(InputError, match="must be between 0 and 1") as caught:
        config.guard_spec()
    assert caught.value.field == "--threshold"


def test_a_spec_without_overrides_is_the_spec_itself():
    spec = parse_guard_spec("minilm", threshold=0.6)
    assert RunConfig(guard=spec).guard_spec() is spec
