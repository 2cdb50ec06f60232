"""The engine and call-limit flags are one definition (`margin.cli.options.ENGINE_FLAGS` and
`LIMIT_FLAGS`, each from the settings table) that `margin run`, `margin ablate` and `margin
study` add, never spelled as parameters of their own (issue 36, item 5)."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import pytest
import typer
from typer.testing import CliRunner

from margin.cli import options as o
from margin.cli.common import call_settings
from margin.cli.entry import app as cli_app
from margin.engine import settings
from margin.errors import InputError
from margin.serving.calls import CallSettings

GROUPS = {"run": (*o.ENGINE_FLAGS, *o.LIMIT_FLAGS), "ablate": (*o.ENGINE_FLAGS, *o.LIMIT_FLAGS),
          "study": o.ENGINE_FLAGS}


def command(name: str) -> Any:
    group = typer.main.get_command(cli_app)
    return group.commands[name]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_each_command_adds_the_shared_flags_and_spells_none_itself(name):
    own = inspect.signature(inspect.unwrap(command(name).callback)).parameters  # the command as written
    shared = {p.name for p in GROUPS[name]}
    assert not shared & set(own), "a shared flag spelled again"
    given = {param.name for param in command(name).params}
    assert shared <= given


def test_every_setting_with_a_flag_but_the_drivers_is_in_the_shared_groups():
    grouped = {p.name for p in (*o.ENGINE_FLAGS, *o.LIMIT_FLAGS)}
    flagged = {s.flag.removeprefix("--").replace("-", "_") for s in settings.SETTINGS if s.flag}
    assert flagged - grouped == {"drivers", "driver_cpus"}  # `margin run`'s alone


def test_with_flags_hands_the_command_its_flags_as_one_dict():
    app = typer.Typer()
    seen: list[dict[str, Any]] = []

    @app.command()
    @o.with_flags(*o.ENGINE_FLAGS, into="flags")
    def probe(name: Annotated[str, typer.Option()] = "x", *, flags: dict[str, Any]) -> None:
        seen.append({"name": name, **flags})

    result = CliRunner().invoke(app, ["--engine", "local", "--name", "y"])
    assert result.exit_code == 0, result.output
    assert seen == [{"name": "y", "engine": "local", "ray_address": None}]


def test_the_flags_become_call_settings_each_limit_checked():
    flags = {"engine": "local", "ray_address": None, "batch_size": 8, "max_missing": "1%", "max_attempts": 2,
             "call_timeout": None, "max_concurrency": None, "requests_per_second": 5.0, "hedge_after": "1.5",
             "max_outage": "2m"}
    assert call_settings(flags) == CallSettings(engine="local", batch_size=8, max_attempts=2, requests_per_second=5.0,
                                                hedge_after_s=1.5, max_outage_s=120.0)
    with pytest.raises(InputError, match="must be at least 1") as caught:
        call_settings({**flags, "max_attempts": 0})
    assert caught.value.field == "--max-attempts"
