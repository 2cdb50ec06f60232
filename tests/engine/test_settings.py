"""Each engine setting is defined once (margin/engine/settings.py); every consumer takes its
name, default, flag and keys from there, and no module writes a default of its own."""

from __future__ import annotations

import ast
from dataclasses import fields

import pytest
import typer

from margin.cli.entry import app as cli_app  # the Typer app, its commands registered
from margin.engine.limits import EndpointLimits
from margin.engine.settings import CALL_TIMEOUT, LIMIT_OPTIONS, MAX_MISSING, SETTINGS
from margin.errors import InputError
from margin.runs.preparing.config import RunConfig
from margin.serving.calls import CallSettings
from margin.studies.config import Runtime
from tests.support.paths import REPO

BY_OPTION = {s.option: s for s in SETTINGS if s.option}
BY_RUNTIME = {s.runtime: s for s in SETTINGS if s.runtime}


def test_endpoint_limits_are_the_settings_with_a_backend_options_key():
    limits = EndpointLimits()
    assert {f.name for f in fields(EndpointLimits)} == set(LIMIT_OPTIONS) == set(BY_OPTION)
    for key, setting in BY_OPTION.items():
        assert getattr(limits, key) == setting.default, key


def test_a_studys_runtime_keys_are_settings_with_their_defaults():
    assert set(Runtime.model_fields) == set(BY_RUNTIME)
    for key, info in Runtime.model_fields.items():
        setting = BY_RUNTIME[key]
        # An endpoint limit is None there: each endpoint's own backend_options decide first.
        assert info.default == (None if setting.option else setting.default), key


#: Settings a run holds beside its calls': how it is split and judged, not how a call is made.
RUN_ONLY = ("drivers", "driver_cpus", "max_missing")


def test_call_settings_hold_every_call_setting_and_a_run_config_the_rest_each_once():
    calls = {f.name: f.default for f in fields(CallSettings)}
    run = {f.name: f.default for f in fields(RunConfig)}
    for setting in SETTINGS:
        holder = run if setting.name in RUN_ONLY else calls
        assert setting.name in holder and setting.name not in (calls if holder is run else run), setting.name
        assert holder[setting.name] == (None if setting.option else setting.default), setting.name
    assert run["calls"] == CallSettings()  # nested, not copied field by field


def test_a_run_config_of_flat_keywords_nests_its_call_settings():
    config = RunConfig.of("keyword", dataset="sample", engine="local", batch_size=8, max_outage_s=60.0, drivers=2)
    assert config.calls == CallSettings(engine="local", batch_size=8, max_outage_s=60.0)
    assert (config.dataset, config.drivers) == ("sample", 2)
    assert RunConfig.of("keyword") == RunConfig("keyword")
    with pytest.raises(InputError, match="takes no option 'batch'; did you mean batch_size") as caught:
        RunConfig.of("keyword", batch=8)  # refused by name, once, for margin.run and every caller
    assert caught.value.field == "batch"


def cli_params(command: str) -> dict[str, object]:
    group = typer.main.get_command(cli_app)
    return {opt: param for param in group.commands[command].params for opt in param.opts}  # type: ignore[attr-defined]


@pytest.mark.parametrize("command", ["run", "ablate", "study", "merge"])
def test_cli_flags_take_their_default_and_help_from_the_table(command):
    params = cli_params(command)
    for setting in SETTINGS:
        param = params.get(setting.flag) if setting.flag else None
        if param is None:
            continue
        assert param.help == setting.cli_help(), setting.flag  # type: ignore[attr-defined]
        assert param.default == (None if setting.option else setting.flag_default), setting.flag  # type: ignore[attr-defined]
    assert command != "run" or all(s.flag in params for s in SETTINGS if s.flag)


def test_defaults_in_words():
    assert MAX_MISSING.flag_default == "1%"
    assert CALL_TIMEOUT.case("batch") == 300.0 and CALL_TIMEOUT.case("request") == CALL_TIMEOUT.default
    assert "300 s a guard's batch on a Ray actor" in CALL_TIMEOUT.cli_help()
    with pytest.raises(InputError, match="unknown engine 'gpu'; expected ray or local"):
        next(s for s in SETTINGS if s.name == "engine").check_choice("gpu", "--engine")


def setting_names() -> set[str]:
    """Every name a setting goes by: its field, backend_options and runtime keys, its CLI parameter."""
    names = set()
    for s in SETTINGS:
        names |= {s.name, s.option, s.runtime, s.flag and s.flag.removeprefix("--").replace("-", "_")}
    return names - {None}  # type: ignore[arg-type]


#: Fields named like a setting that are not one.
NOT_SETTINGS = {"EngineFigures.engine": "which engine a run's calls went through (a figure, reported)"}


def literal_defaults(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """(line, Owner.name) of each field or parameter named like a setting whose default is a
    literal other than None (`x: int = 64`, `Field(default=64)`, `def f(x=64)`)."""
    def literal(node: ast.AST | None) -> bool:
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Field":
            node = next((k.value for k in node.keywords if k.arg == "default"), None)
        return isinstance(node, ast.Constant) and node.value is not None

    found = []

    def visit(node: ast.AST, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name)
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                args = child.args
                positional = args.posonlyargs + args.args
                pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults, strict=True),
                         *zip(args.kwonlyargs, args.kw_defaults, strict=True)]
                found.extend((d.lineno, f"{child.name}.{a.arg}") for a, d in pairs if a.arg in names and literal(d))
                visit(child, child.name)
            elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name):
                if child.target.id in names and literal(child.value):
                    found.append((child.lineno, f"{owner}.{child.target.id}"))
            else:
                visit(child, owner)

    visit(tree, "")
    return [(line, name) for line, name in found if name not in NOT_SETTINGS]


def test_no_module_writes_a_settings_default_of_its_own():
    names = setting_names()
    table = REPO / "margin" / "engine" / "settings.py"
    written = [f"{path.relative_to(REPO)}:{line}: {name}"
               for path in sorted((REPO / "margin").rglob("*.py")) if path != table
               for line, name in literal_defaults(ast.parse(path.read_text("utf-8")), names)]
    assert not written, "defaults written outside margin/engine/settings.py:\n" + "\n".join(written)


def test_the_check_finds_a_literal_default():
    tree = ast.parse("class A:\n    batch_size: int = 64\n    retry_wait_s: float = Field(default=0.5)\n"
                     "def f(*, max_attempts=3, call_timeout=None): ...\n")
    assert literal_defaults(tree, setting_names()) == [(2, "A.batch_size"), (3, "A.retry_wait_s"),
                                                       (4, "f.max_attempts")]


def test_a_studys_runtime_keys_take_the_values_the_table_allows():
    import pydantic

    for key, setting in BY_RUNTIME.items():
        assert (setting.at_least, setting.above, setting.at_most) != (None, None, None), f"{key}: no bounds"
        edges = [(setting.at_least, setting.at_least - 1 if setting.at_least is not None else None),
                 (setting.above + 1 if setting.above is not None else None, setting.above),
                 (setting.at_most, setting.at_most + 1 if setting.at_most is not None else None)]
        for inside, outside in edges:
            if inside is not None:
                Runtime(**{key: inside})
            if outside is not None:
                with pytest.raises(pydantic.ValidationError):
                    Runtime(**{key: outside})


def test_a_studys_runtime_block_becomes_its_call_settings_through_the_table():
    runtime = Runtime(max_attempts=2, batch_size=8, retry_wait_s=0.0, call_timeout_s=30.0, max_outage_s=60.0,
                      max_missing=0.5)
    assert CallSettings.of_runtime(runtime, engine="local", ray_address="auto") == CallSettings(
        engine="local", ray_address="auto", batch_size=8, retry_wait_s=0.0, max_attempts=2, call_timeout_s=30.0,
        max_outage_s=60.0)


def test_a_flags_number_is_checked_against_the_table():
    with pytest.raises(InputError, match="must be a finite number above 0") as caught:
        CALL_TIMEOUT.check_number(float("inf"), "--call-timeout")
    assert caught.value.field == "--call-timeout"
    CALL_TIMEOUT.check_number(None, "--call-timeout")  # not given
    with pytest.raises(InputError, match="must be at least 1"):
        next(s for s in SETTINGS if s.name == "max_attempts").check_number(0, "--max-attempts")
