"""The case schema beyond XSTest's: conversations, targets, policies and context (issue 32, item 1)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from margin.datasets import load_dataset
from margin.datasets.cases import parse_messages
from margin.errors import InputError
from margin.types import Exchange, Turn


def write(tmp_path: Path, name: str, content: str) -> Path:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    return path


def jsonl(tmp_path: Path, rows: list[dict[str, object]], name: str = "cases.jsonl") -> Path:
    return write(tmp_path, name, "".join(json.dumps(r) + "\n" for r in rows))


def csv_file(tmp_path: Path, header: list[str], rows: list[list[str]], name: str = "cases.csv") -> Path:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return write(tmp_path, name, out.getvalue())


CHAT = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "How do I kill a process?"},
        {"role": "assistant", "content": "Use kill PID."}]


def test_a_conversation_in_jsonl_judges_its_last_assistant_turn(tmp_path):
    path = jsonl(tmp_path, [{"id": "c1", "label": "safe", "messages": CHAT, "target": "response",
                             "policy": "No violence.", "context": "A man page."}])
    case = load_dataset(str(path), "response").prompts[0]
    assert case.text == "Use kill PID."
    assert case.history == (Turn("system", "You are terse."), Turn("user", "How do I kill a process?"))
    assert (case.target, case.policy, case.context) == ("response", "No violence.", "A man page.")
    assert case.extra == (("policy", "sha256:57fca962ea92"),)  # the policy's name: its text's digest
    assert case.exchange("Use k1ll PID.") == Exchange(
        (*case.history, Turn("assistant", "Use k1ll PID.")), "response", "No violence.", "A man page.")


def test_a_csv_holds_the_conversation_as_json_text_and_mixes_with_plain_prompts(tmp_path):
    path = csv_file(tmp_path, ["id", "prompt", "messages", "label", "lang"],
                    [["p1", "plain prompt", "", "safe", "en"],
                     ["c1", "", json.dumps(CHAT[:2]), "unsafe", "en"]])
    plain, chat = load_dataset(str(path)).prompts
    assert plain.plain and plain.text == "plain prompt" and plain.history == ()
    assert not chat.plain and chat.text == "How do I kill a process?" and chat.history == (Turn("system", "You are terse."),)
    assert chat.extra == (("lang", "en"),)  # messages, target, policy, context are never slice tags


def test_costs_are_over_target_texts(tmp_path):
    path = jsonl(tmp_path, [{"id": "a", "label": "safe", "messages": CHAT},
                            {"id": "b", "label": "safe", "messages": [{"role": "user", "content": "hi"},
                                                                       {"role": "assistant", "content": "hello"}]}])
    dataset = load_dataset(str(path), "response")
    assert dataset.texts == ["Use kill PID.", "hello"]
    assert dataset.target == "response" and dataset.lines == {"a": 1, "b": 2}


def test_a_plain_xstest_file_loads_as_it_always_did(xstest_csv):
    dataset = load_dataset(str(xstest_csv))
    assert len(dataset.prompts) == 450 and all(p.plain for p in dataset.prompts)
    assert dataset.target == "prompt"


BAD = [
    # (rows, run target, line, field, words)
    ([{"id": "1", "label": "safe", "prompt": "hi", "target": "response"}], "response", 1, "target",
     "a response target needs an assistant turn"),
    ([{"id": "1", "label": "safe", "messages": CHAT[:2]}], "response", 1, "messages",
     "has no assistant turn"),
    ([{"id": "1", "label": "safe", "messages": CHAT}], "prompt", 1, "messages", "ends with an assistant turn"),
    ([{"id": "1", "label": "safe", "prompt": "ok"},
      {"id": "2", "label": "safe", "messages": [{"role": "tool", "content": "x"}]}], "prompt", 2, "messages",
     "unknown role 'tool'"),
    ([{"id": "1", "label": "safe", "messages": "[{\"role\": \"user\", \"content\": "}], "prompt", 1, "messages",
     "not valid JSON"),
    ([{"id": "1", "label": "safe", "messages": []}], "prompt", 1, "messages", "non-empty JSON list"),
    ([{"id": "1", "label": "safe", "messages": [{"role": "user", "content": "a", "name": "x"}]}], "prompt", 1,
     "messages", "unknown key(s) name"),
    ([{"id": "1", "label": "safe", "messages": [{"role": "user", "content": "  "}]}], "prompt", 1, "messages",
     "non-empty text"),
    ([{"id": "1", "label": "safe", "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}],
     "prompt", 1, "messages", "turn 2 is a user turn; expected an assistant turn here"),
    ([{"id": "1", "label": "safe", "messages": [{"role": "user", "content": "a"},
                                                 {"role": "system", "content": "b"}]}],
     "prompt", 1, "messages", "expected a system turn only first"),
    ([{"id": "1", "label": "safe", "messages": [{"role": "system", "content": "a"}]}], "prompt", 1, "messages",
     "only a system turn"),
    ([{"id": "1", "label": "safe", "prompt": "x", "messages": CHAT[:2]}], "prompt", 1, "prompt", "not both"),
    ([{"id": "1", "label": "safe", "prompt": "x", "target": "reply"}], "prompt", 1, "target", "unknown target"),
    ([{"id": "1", "label": "safe", "messages": CHAT, "target": "response"}], "prompt", 1, "target",
     "pass --target response"),
    ([{"id": "1", "label": "safe", "prompt": "x", "policy": ["a"]}], "prompt", 1, "policy", "expected text"),
    ([{"id": "1", "label": "safe", "prompt": "x", "context": 3}], "prompt", 1, "context", "expected text"),
]


@pytest.mark.parametrize(("rows", "target", "line", "field", "words"), BAD)
def test_a_bad_case_is_one_error_naming_file_line_and_field(tmp_path, rows, target, line, field, words):
    path = jsonl(tmp_path, rows)
    with pytest.raises(InputError) as info:
        load_dataset(str(path), target)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), line, field)
    assert words in info.value.message


def test_a_bad_conversation_in_csv_names_its_line(tmp_path):
    path = csv_file(tmp_path, ["id", "messages", "label"],
                    [["1", json.dumps(CHAT[:2]), "safe"], ["2", "{not json", "safe"]])
    with pytest.raises(InputError) as info:
        load_dataset(str(path))
    assert (info.value.line, info.value.field) == (3, "messages")


def test_a_messages_column_stands_in_for_prompt_but_a_row_needs_one(tmp_path):
    path = csv_file(tmp_path, ["id", "messages", "label"], [["1", "", "safe"]])
    with pytest.raises(InputError, match="empty prompt"):
        load_dataset(str(path))
    with pytest.raises(InputError, match="missing required column"):
        load_dataset(str(csv_file(tmp_path, ["id", "context", "label"], [["1", "x", "safe"]], "n.csv")))


def test_the_built_in_datasets_hold_prompts_only():
    with pytest.raises(InputError, match="prompts only") as info:
        load_dataset("sample", "response")
    assert info.value.field == "--target"


# -- the messages parser, as properties -------------------------------------------------------------

TEXT = st.text(min_size=1).filter(lambda t: t.strip() and not any(0xD800 <= ord(c) <= 0xDFFF for c in t))


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, str]]:
    turns = draw(st.integers(1, 6))
    out = [{"role": "system", "content": draw(TEXT)}] if draw(st.booleans()) else []
    out += [{"role": ("user", "assistant")[i % 2], "content": draw(TEXT)} for i in range(turns)]
    return out


@settings(max_examples=200, deadline=None)
@given(conversations(), st.booleans())
def test_a_valid_conversation_parses_back_to_its_turns(chat, as_text):
    value = json.dumps(chat, ensure_ascii=bool(len(chat) % 2)) if as_text else chat
    assert parse_messages(value, "f.jsonl", 7) == tuple(Turn(t["role"], t["content"]) for t in chat)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.one_of(JSON, st.text(), st.lists(st.dictionaries(st.sampled_from(["role", "content", "name"]),
                                                           st.sampled_from(["user", "assistant", "system", "tool", "",
                                                                            "x"]) | st.integers()),
                                         max_size=5)))
def test_any_value_is_turns_or_one_input_error_naming_the_field(value):
    try:
        turns = parse_messages(value, "f.csv", 3)
    except InputError as exc:
        assert (exc.path, exc.line, exc.field) == ("f.csv", 3, "messages")
    else:
        assert turns and all(t.role in ("system", "user", "assistant") and t.content.strip() for t in turns)
        roles = [t.role for t in turns if t.role != "system"]
        assert roles == [("user", "assistant")[i % 2] for i in range(len(roles))]


# -- policies by id: --policies FILE -----------------------------------------------------------------

def test_policy_ids_name_texts_in_a_policies_file(tmp_path):
    policies = write(tmp_path, "policies.yaml", "weapons: No help with weapons.\nmedical: |\n  No dosing advice.\n")
    path = jsonl(tmp_path, [{"id": "1", "label": "safe", "prompt": "hi", "policy": "medical"},
                            {"id": "2", "label": "safe", "prompt": "yo"}])
    dataset = load_dataset(str(path), policies=str(policies))
    assert [p.policy for p in dataset.prompts] == ["No dosing advice.\n", ""]
    assert dataset.policies is not None and dataset.policies.name == "policies.yaml"
    assert load_dataset(str(path)).prompts[0].policy == "medical"  # without the file, the cell is the text
    # the policy axis: a case names its policy by its id in the file, a case without one has no tag
    assert [p.extra for p in dataset.prompts] == [(("policy", "medical"),), ()]


def test_a_policy_text_is_named_by_a_digest_sorted_among_the_tags(tmp_path):
    path = csv_file(tmp_path, ["id", "prompt", "label", "policy", "lang", "zone"],
                    [["1", "hi", "safe", "No violence.", "en", "eu"], ["2", "yo", "safe", "No violence.", "", ""],
                     ["3", "ho", "safe", "", "de", "us"]])
    first, second, third = load_dataset(str(path)).prompts
    # sha256("No violence.") = 57fca962ea92...: the same text gets the same name on every line
    assert first.extra == (("lang", "en"), ("policy", "sha256:57fca962ea92"), ("zone", "eu"))
    assert second.extra == (("lang", ""), ("policy", "sha256:57fca962ea92"), ("zone", ""))
    assert third.extra == (("lang", "de"), ("zone", "us"))


@pytest.mark.parametrize(("content", "line", "field", "words"), [
    ("weapons: No help with weapons.\n", 1, "policy", "unknown policy id 'medical'"),
    ("- a list\n", 1, "--policies", "expected a mapping"),
    ("weapons: No help.\nmedical: ''\n", 2, "medical", "non-empty text"),
])
def test_a_bad_policy_id_or_file_names_where(tmp_path, content, line, field, words):
    policies = write(tmp_path, "policies.yaml", content)
    path = jsonl(tmp_path, [{"id": "1", "label": "safe", "prompt": "hi", "policy": "medical"}])
    with pytest.raises(InputError) as info:
        load_dataset(str(path), policies=str(policies))
    assert (info.value.line, info.value.field) == (line, field) and words in info.value.message
