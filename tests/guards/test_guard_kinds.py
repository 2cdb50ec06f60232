"""Issue 36, item 6: guard kinds own what they accept. A kind's row in `margin.guards.kinds`
states the settings it takes, its own checks and where its paths are taken from; the spec
check (`margin.guards.checks`) reads the row and nothing else, so a new kind is one row."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from margin.errors import InputError
from margin.guards import kinds
from margin.guards.checks import check, spec_from
from margin.guards.keyword import KeywordGuard
from margin.guards.kinds import KINDS, SETTINGS, GuardKind
from margin.guards.make import build_guard, parse_guard, with_overrides
from margin.guards.spec import BUILTIN, FLAGS, GuardSpec, kind_name

# What each kind takes, written out by hand: a row that changes what its kind accepts fails here.
ACCEPTS = {
    "keyword": set(),
    "minilm": {"threshold"},
    "python": {"threshold", "revision", "weights"},
    "preset": set(SETTINGS) - {"weights"},
    "prompted": set(SETTINGS) - {"weights"},
}
# A value of each setting that its own kind's checks take, for a guard of every kind.
SAMPLES = {"backend": "transformers", "model": "org/model", "base_url": "http://127.0.0.1:1/v1",
           "api_key_env": "MY_KEY", "threshold": 0.4, "revision": "abc123", "weights": "package:margin",
           "options": {"x": 1}, "backend_options": {"max_concurrency": 2}, "request_options": {"stop": ["a"]}}
NAMES = {"keyword": "keyword", "minilm": "minilm", "python": "python:g.py:G", "preset": "llama-guard-4",
         "prompted": "prompted"}


def test_every_kind_states_what_it_accepts():
    required = [f.name for f in dataclasses.fields(GuardKind)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    assert "accepts" in required  # a row cannot leave it out and silently take nothing
    assert {name: set(kind.accepts) for name, kind in KINDS.items()} == ACCEPTS
    assert all(isinstance(kind.accepts, frozenset) for kind in KINDS.values())


def test_every_name_a_guard_can_have_is_a_row():
    named = {kind_name(name) for name in [*BUILTIN, "python:g.py:G"]}
    assert named == set(KINDS) and all(KINDS[name].name == name for name in KINDS)


def test_a_row_cannot_accept_what_no_guard_has():
    with pytest.raises(ValueError, match="'echo' accepts \\['colour'\\]"):
        GuardKind("echo", frozenset({"colour"}), lambda spec: KeywordGuard())


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("setting", SETTINGS)
def test_each_setting_is_taken_or_refused_as_the_row_says(kind, setting):
    refusal = FLAGS.get(setting, setting)
    try:
        spec_from(NAMES[kind], {setting: SAMPLES[setting]})
    except InputError as exc:
        refused = exc.field == refusal and ("takes no" in exc.message or "weights are for" in exc.message)
    else:
        refused = False
    assert refused == (setting not in ACCEPTS[kind])


@pytest.fixture
def echo(monkeypatch):
    """A made-up kind `echo`: its row, and its name in `kind_name`; nothing else."""
    def add(**row):  # type: ignore[no-untyped-def]
        row = {"accepts": frozenset(), "build": lambda spec: KeywordGuard(), **row}
        monkeypatch.setitem(KINDS, "echo", GuardKind("echo", **row))
        monkeypatch.setattr(kinds, "kind_name", lambda name: "echo" if name == "echo" else kind_name(name))
    return add


def refusal(make):  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as caught:
        make()
    return caught.value.message, caught.value.field


def test_a_made_up_row_drives_what_is_accepted(echo):
    echo(accepts=frozenset({"threshold"}))
    assert spec_from("echo", {"threshold": 0.4}).threshold == 0.4
    assert refusal(lambda: spec_from("echo", {"revision": "abc"})) == ("the echo guard takes no revision", "revision")
    assert refusal(lambda: spec_from("echo", {"backend": "openai"})) == ("the echo guard takes no --backend",
                                                                         "--backend")
    assert refusal(lambda: spec_from("echo", {"options": {"a": 1}})) == (
        "the echo guard takes no options (it calls no backend)", "options")
    # The same row, read by the API's overrides and by the build.
    assert refusal(lambda: with_overrides(GuardSpec(name="echo"), model="x")) == ("the echo guard takes no --model",
                                                                                "--model")
    assert isinstance(build_guard(spec_from("echo", {"threshold": 0.4})), KeywordGuard)


def test_the_same_row_without_the_setting_refuses_it_in_the_same_form(echo):
    echo()
    assert refusal(lambda: spec_from("echo", {"threshold": 0.4})) == ("the echo guard takes no --threshold",
                                                                      "--threshold")
    # As the keyword guard's own refusal reads.
    assert refusal(lambda: spec_from("keyword", {"threshold": 0.4})) == ("the keyword guard takes no --threshold",
                                                                         "--threshold")


def test_a_row_that_takes_a_backend_refuses_options_without_saying_it_calls_none(echo):
    echo(accepts=frozenset({"backend"}))
    assert refusal(lambda: spec_from("echo", {"request_options": {"stop": ["a"]}})) == (
        "the echo guard takes no request_options", "request_options")


def test_a_rows_own_refusal_and_checks_come_after_the_settings_it_refuses(echo):
    def own_check(spec: GuardSpec) -> None:
        raise InputError(f"{spec.name} wants a threshold under 0.5", field="--threshold")

    echo(accepts=frozenset({"threshold"}), check=own_check, refusals={"weights": "{name} has no weights"})
    assert refusal(lambda: spec_from("echo", {"threshold": 0.7})) == ("echo wants a threshold under 0.5",
                                                                      "--threshold")
    assert refusal(lambda: spec_from("echo", {"threshold": 0.7, "weights": "w"})) == ("echo has no weights",
                                                                                      "weights")


def test_a_rows_paths_are_taken_from_the_guard_files_folder(echo, tmp_path):
    def place(name: str, fields: dict, folder: Path | None) -> tuple[str, dict]:
        return name, {**fields, "revision": f"{folder.name if folder else '-'}:{fields['revision']}"}

    echo(accepts=frozenset({"revision"}), place=place)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "g.yaml").write_text("guard: echo\nrevision: abc\n")
    assert parse_guard(str(tmp_path / "sub" / "g.yaml"), {}).revision == "sub:abc"
    assert spec_from("echo", {"revision": "abc"}).revision == "-:abc"


def test_a_guard_files_refused_key_is_named_with_its_line(echo, tmp_path):
    echo(accepts=frozenset({"threshold"}))
    path = tmp_path / "g.yaml"
    path.write_text("guard: echo\nthreshold: 0.4\nbackend: openai\n")
    with pytest.raises(InputError) as caught:
        parse_guard(str(path), {})
    assert (caught.value.message, caught.value.line, caught.value.field) == (
        "the echo guard takes no backend", 3, "backend")


def test_a_kind_that_loads_no_model_lets_its_build_errors_through(echo):
    def broken(spec: GuardSpec) -> KeywordGuard:
        raise OSError("no lexicon")

    echo(build=broken)
    with pytest.raises(OSError, match="no lexicon"):
        build_guard(spec_from("echo", {}))


def test_an_unknown_guard_given_through_the_api_is_refused_as_on_the_command_line():
    command_line = refusal(lambda: parse_guard("nosuch", {"threshold": 0.3}))
    assert command_line == ("unknown guard 'nosuch' (see `margin guards list`)", "--guard")
    # It was a bare KeyError (and, with weights, a misleading "loads its checkpoint").
    assert refusal(lambda: with_overrides(GuardSpec(name="nosuch"), threshold=0.3)) == command_line
    assert refusal(lambda: check(GuardSpec(name="nosuch", weights="w"))) == command_line
