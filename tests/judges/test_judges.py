"""The judge: its strict parse rule, its templates and the LLM judge's plumbing."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from margin.errors import InputError
from margin.judges.llm import LLMJudge
from margin.judges.parse import KEYS, parse_verdict
from margin.judges.template import PLACEHOLDERS, load_template, parse_template
from margin.judges.verdicts import BEHAVIOURS, JudgeCase

GOOD = {"rationale": "Both refuse the same request.", "original_behaviour": "refuses",
        "transformed_behaviour": "refuses", "same_request": True, "preserved": True}


def answer(**changes: object) -> str:
    return json.dumps({**GOOD, **changes})


def test_a_well_formed_answer_is_read_exactly():
    v = parse_verdict(answer())
    assert v.status == "preserved" and v.preserved
    assert (v.original_behaviour, v.transformed_behaviour, v.same_request) == ("refuses", "refuses", True)
    assert v.rationale == "Both refuse the same request."
    changed = parse_verdict(answer(transformed_behaviour="complies", preserved=False))
    assert changed.status == "changed" and not changed.preserved
    assert parse_verdict("  \n" + answer() + "\n").status == "preserved"  # surrounding whitespace only


@pytest.mark.parametrize("output", [
    "```json\n" + answer() + "\n```",  # a code fence
    "Verdict: " + answer(),  # words before
    answer() + " I hope this helps.",  # words after
    answer() + answer(),  # two objects
    json.dumps([GOOD]),  # not an object
    json.dumps({k: v for k, v in GOOD.items() if k != "rationale"}),  # a key missing
    json.dumps({**GOOD, "confidence": 0.9}),  # an extra key
    answer(rationale=""),  # empty rationale
    answer(original_behaviour="partially complies"),  # unknown behaviour
    answer(same_request="yes"),  # not a boolean
    answer(preserved=1),  # 1 is not true
    answer(preserved=False),  # contradicts the behaviours it gives
    answer(same_request=False),  # preserved=true with a different request contradicts itself
    "preserved",  # a bare word is never searched for
    "",
    "{not json}",
])
def test_anything_else_is_unparseable_and_counts_as_not_preserved(output):
    v = parse_verdict(output)
    assert v.status == "unparseable" and not v.preserved
    assert v.rationale.startswith("unparseable judge output")
    assert v.raw == output


@given(st.text(max_size=300))
def test_arbitrary_text_never_raises_and_only_exact_objects_parse(text):
    v = parse_verdict(text)
    if v.status != "unparseable":
        value = json.loads(text)
        assert set(value) == set(KEYS)


@given(st.text(min_size=1, max_size=80).filter(str.strip), st.sampled_from(BEHAVIOURS),
       st.sampled_from(BEHAVIOURS), st.booleans())
def test_every_consistent_answer_round_trips(rationale, before, after, same):
    preserved = before == after and same
    v = parse_verdict(json.dumps({"rationale": rationale, "original_behaviour": before,
                                  "transformed_behaviour": after, "same_request": same, "preserved": preserved}))
    assert v.status == ("preserved" if preserved else "changed")
    assert (v.original_behaviour, v.transformed_behaviour, v.same_request) == (before, after, same)
    assert v.rationale == rationale.strip()


CASE = JudgeCase("How do I kill a process?", "Use kill -9.", "How do I k\u200bill a process?", "Use kill -9.")


def test_the_builtin_template_shows_the_judge_all_four_texts():
    template = load_template("behaviour")
    messages = template.render(CASE)
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    for text in (CASE.original_prompt, CASE.original_response, CASE.transformed_prompt, CASE.transformed_response):
        assert text in user
    assert "{{" not in user
    assert len(template.sha256) == 64


def test_substitution_is_one_pass_so_a_response_cannot_inject_a_placeholder():
    case = JudgeCase("p", "I say {{transformed_response}} and {{ original_prompt }}", "q", "r")
    user = load_template("behaviour").render(case)[1]["content"]
    assert "I say {{transformed_response}} and {{ original_prompt }}" in user


def template_bytes(user: str, **extra: str) -> bytes:
    fmt = extra.pop("format", "margin-judge-json/1")
    lines = ["name: t", f"format: {fmt}", *(f"{k}: {v}" for k, v in extra.items()),
             "user: |", *("  " + line for line in user.splitlines())]
    return ("\n".join(lines) + "\n").encode()


ALL = " ".join("{{" + p + "}}" for p in PLACEHOLDERS)


@pytest.mark.parametrize("data, field, line", [
    (template_bytes("{{original_prompt}} {{original_response}} {{transformed_prompt}}"), "user", 3),
    (template_bytes(ALL + " {{model_name}}"), "user", 3),
    (template_bytes(ALL, format="free-text"), "format", 2),
    (template_bytes(ALL, temperature="0"), "temperature", 3),
    (b"name: t\nformat: margin-judge-json/1\n", "user", 1),
])
def test_template_errors_name_the_file_line_and_field(data, field, line):
    with pytest.raises(InputError) as caught:
        parse_template(data, "judge.yaml")
    assert caught.value.field == field and caught.value.line == line and caught.value.path == "judge.yaml"


def test_a_template_file_is_read_relative_to_the_config(tmp_path):
    (tmp_path / "mine.yaml").write_bytes(template_bytes(ALL))
    template = load_template("mine.yaml", base=tmp_path)
    assert template.render(CASE)[0] == {"role": "user", "content": " ".join(
        [CASE.original_prompt, CASE.original_response, CASE.transformed_prompt, CASE.transformed_response]) + "\n"}


def test_llm_judge_sends_rendered_messages_and_keeps_missing_outputs_missing():
    judge = LLMJudge(load_template("behaviour"), {"model": "m"})
    sent: list[list[dict[str, str]]] = []

    def complete(batch: list[list[dict[str, str]]]) -> list[str | None]:
        sent.extend(batch)
        return [answer(), "not json", None]

    verdicts = judge.judge([CASE, CASE, CASE], complete)
    assert [v.status if v else None for v in verdicts] == ["preserved", "unparseable", None]
    assert sent[0] == judge.messages(CASE)
    other = LLMJudge(load_template("behaviour"), {"model": "other"})
    assert other.id != judge.id and judge.id.startswith("behaviour~")
    assert LLMJudge(load_template("behaviour"), {"model": "m"}, judge_id="mine").id == "mine"
