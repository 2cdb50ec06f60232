"""The `prompted` guard kind (issue 31, item 4): an instruct model, a policy and a label
rule (words or a regex); p_unsafe from the label tokens only where both sides are among the
top logprobs."""

from __future__ import annotations

import math

import pytest

from margin.backends.generation import Generation, Step
from margin.errors import InputError
from margin.guards.adapters.prompted import Prompted, step_at
from margin.guards.make import describe_guard, parse_guard_spec

POLICY = "Answer 1 if the request is harmful, else 0."


def out(tokens: list[tuple[str, dict[str, float]]]) -> Generation:
    steps = tuple(Step(t, tuple((k, math.log(p)) for k, p in top.items())) for t, top in tokens)
    return Generation(text="".join(t for t, _ in tokens), steps=steps)


def test_words_read_the_whole_reply_and_anything_else_is_invalid():
    guard = Prompted("", {"policy": POLICY, "labels": {"unsafe": ["unsafe", "harmful"], "safe": "safe"}})
    assert guard.parse_one(out([(" Unsafe", {})])).label == "unsafe"
    assert guard.parse_one(out([("harm", {}), ("ful.", {})])).label == "unsafe"
    assert guard.parse_one(out([('"safe"', {})])).label == "safe"
    for reply in ("", "this is unsafe", "unsafe, because", "maybe"):
        assert guard.parse_one(out([(reply, {})])).label == "invalid"


def test_a_pattern_reads_its_label_group():
    guard = Prompted("", {"policy": POLICY, "labels": {"unsafe": "1", "safe": "0"}, "pattern": r"Verdict: (?P<label>\d)"})
    reply = out([("Verdict", {}), (":", {}), (" 1", {" 1": 0.7, " 0": 0.2}), (" because", {})])
    verdict = guard.parse_one(reply)
    assert verdict.label == "unsafe" and verdict.p_unsafe == pytest.approx(0.7 / 0.9)
    assert guard.parse_one(out([("Verdict: 2", {})])).label == "invalid"


def test_p_unsafe_only_with_both_sides_among_the_top_logprobs():
    guard = Prompted("", {"policy": POLICY, "labels": {"unsafe": "1", "safe": "0"}})
    assert guard.parse_one(out([("0", {"0": 0.3, "1": 0.6})])).p_unsafe == pytest.approx(2 / 3)
    only = guard.parse_one(out([("0", {"0": 0.3, "The": 0.6})]))
    assert only.label == "safe" and only.p_unsafe is None  # '1' unknown, not zero


def test_a_multi_token_word_counts_its_first_piece():
    guard = Prompted("", {"policy": POLICY})
    verdict = guard.parse_one(out([("un", {"un": 0.5, "safe": 0.25, "The": 0.2}), ("safe", {})]))
    assert verdict.label == "unsafe" and verdict.p_unsafe == pytest.approx(2 / 3)


def test_step_at_finds_the_token_holding_an_offset():
    steps = (Step(" a"), Step("bc"), Step(" d"))
    assert step_at(steps, 1) == steps[0] and step_at(steps, 2) == steps[1] and step_at(steps, 9) is None
    assert step_at(steps, 3) is None  # a label that begins inside a token has no step of its own


@pytest.mark.parametrize(("options", "field"), [
    ({}, "options.policy"),
    ({"policy": POLICY, "labels": {"unsafe": "x"}}, "options.labels"),
    ({"policy": POLICY, "labels": {"unsafe": "x", "safe": "X"}}, "options.labels"),
    ({"policy": POLICY, "labels": {"unsafe": [], "safe": "y"}}, "options.labels.unsafe"),
    ({"policy": POLICY, "pattern": "("}, "options.pattern"),
    ({"policy": POLICY, "user": "no placeholder"}, "options.user"),
])
def test_bad_options_are_one_error_naming_the_field(options, field):
    with pytest.raises(InputError) as caught:
        Prompted("", options)
    assert caught.value.field == field


def test_the_request_is_the_policy_and_the_framed_text_with_no_server_specific_field():
    guard = Prompted("", {"policy": POLICY, "user": "Request: {text}\nAnswer:"})
    (request,) = guard.requests("hi {x}")
    assert request.messages == ({"role": "system", "content": POLICY},
                                {"role": "user", "content": "Request: hi {x}\nAnswer:"})
    assert not request.extra and not request.chat_template_kwargs and request.add_generation_prompt


def test_a_guard_file_gives_the_model_the_policy_and_a_grammar(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("guard: prompted\nbase_url: http://127.0.0.1:9/v1\nmodel: smollm2\n"
                    f"options: {{policy: '{POLICY}', labels: {{unsafe: '1', safe: '0'}}}}\n"
                    "request_options: {grammar: 'root ::= \"0\" | \"1\"'}\n")
    info = describe_guard(parse_guard_spec(str(path)))
    assert info.family == "prompted" and info.backend == "openai" and info.checkpoint == "smollm2"
    assert "request.grammar" in dict(info.params) and info.id.startswith("prompted~")
    with pytest.raises(InputError) as caught:
        parse_guard_spec("prompted", backend="openai", base_url="http://h/v1")
    assert caught.value.field == "--model"


def test_a_prompted_guard_behind_a_server_is_streamed_as_every_remote_guard_is():
    """Its requests go through the engine's stream (one attempt each, errors no retry can change
    kept as such), not through a batch of in-process calls."""
    from margin.serving.guard_pool import endpoint_url, is_remote

    spec = parse_guard_spec("prompted", base_url="http://127.0.0.1:9/v1", model="m", options={"policy": POLICY})
    assert is_remote(spec) and endpoint_url(spec) == "http://127.0.0.1:9/v1"
    assert not is_remote(parse_guard_spec("prompted", backend="transformers", model="m", options={"policy": POLICY}))
