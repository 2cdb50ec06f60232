"""What several commands do alike: parse shares and call limits, print tables, fail a
command whose outputs are written but whose coverage is short."""

from __future__ import annotations

import math
import shlex
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NoReturn

import typer

from margin.cli.app import ARGS, console, err
from margin.engine import settings
from margin.engine.limits import parse_duration
from margin.errors import InputError
from margin.serving.calls import CallSettings


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def parse_share(text: str, flag: str) -> float:
    try:
        return float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise InputError(f"expected a share such as 1% or 0.01, got {text!r}", field=flag) from None


def call_settings(flags: dict[str, Any]) -> CallSettings:
    """The engine and call-limit flags (`options.ENGINE_FLAGS` and `LIMIT_FLAGS`) as a run's
    `CallSettings`, each limit checked (exit 2 naming the flag)."""
    limits = check_limits(max_attempts=flags["max_attempts"], call_timeout=flags["call_timeout"],
                          max_concurrency=flags["max_concurrency"], requests_per_second=flags["requests_per_second"],
                          hedge_after=flags["hedge_after"], max_outage=flags["max_outage"])
    return CallSettings(engine=flags["engine"], ray_address=flags["ray_address"], batch_size=flags["batch_size"],
                        **limits)


def check_limits(*, max_attempts: int | None, call_timeout: float | None, max_concurrency: int | None,
                 requests_per_second: float | None, hedge_after: str | None,
                 max_outage: str | None = None) -> dict[str, Any]:
    """The call-limit flags as CallSettings fields, each checked (exit 2 naming the flag)."""
    for value, setting in ((max_attempts, settings.MAX_ATTEMPTS), (max_concurrency, settings.MAX_CONCURRENCY),
                           (call_timeout, settings.CALL_TIMEOUT), (requests_per_second, settings.REQUESTS_PER_SECOND)):
        assert setting.flag is not None
        setting.check_number(value, setting.flag)
    hedge: float | str | None = hedge_after
    if hedge_after is not None and hedge_after not in ("auto", "off"):
        try:
            hedge = float(hedge_after)
        except ValueError:
            raise InputError(f"expected seconds, auto or off, got {hedge_after!r}",
                             field=settings.HEDGE_AFTER.flag) from None
        if not (math.isfinite(hedge) and hedge > 0):
            raise InputError("must be a finite number above 0 (or off)", field=settings.HEDGE_AFTER.flag)
    outage = None
    if max_outage is not None:
        try:
            outage = parse_duration(max_outage)
        except ValueError as exc:
            raise InputError(str(exc), field=settings.MAX_OUTAGE.flag) from None
    given = {settings.MAX_ATTEMPTS: max_attempts, settings.CALL_TIMEOUT: call_timeout,
             settings.MAX_CONCURRENCY: max_concurrency, settings.REQUESTS_PER_SECOND: requests_per_second,
             settings.HEDGE_AFTER: hedge, settings.MAX_OUTAGE: outage}
    return {setting.name: value for setting, value in given.items()}


def resume_command(command: str, folder: Path, argv: list[str] | None = None) -> str:
    """This invocation of `margin COMMAND` again, continuing `folder` (`margin run ...
    --resume DIR`; `margin study|ablate ... --out DIR --resume`): what to type once an endpoint
    that was down is back, or after a Ctrl-C."""
    from margin.backends.secrets import public_url

    tail = ["--resume", str(folder)] if command == "run" else ["--out", str(folder), "--resume"]
    # Printed, so a URL's credentials are not: the user gives them again where it says [redacted].
    def shown(arg: str) -> str:
        flag, eq, value = arg.partition("=")
        return f"{flag}={public_url(value)}" if eq and flag.startswith("--") else public_url(arg)

    return shlex.join(["margin", command, *map(shown, _without_out(command, argv)), *tail])


def _without_out(command: str, argv: list[str] | None) -> list[str]:
    """The invocation's arguments after the command, less --out and --resume."""
    args = list((ARGS or sys.argv[1:]) if argv is None else argv)
    if args and args[0] == command:
        args = args[1:]
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--out" or (arg == "--resume" and command == "run"):
            skip = True
        elif arg != "--resume" and not arg.startswith(("--out=", "--resume=")):
            kept.append(arg)
    return kept


def interrupted(out_dir: Path | None, next_step: str | None) -> NoReturn:
    """Ctrl-C: what was recorded stays in `out_dir`, and `next_step` says what to type next
    (the command that continues it); exit 130. None: nothing was recorded. (SystemExit, not
    typer.Exit: typer turns a Ctrl-C no command caught into exit code 130 too, which `main`
    then says in its own line.)"""
    if out_dir is not None and next_step is not None:
        err.print(f"interrupted: {out_dir}/ keeps what was recorded; {next_step}", markup=False,
                  highlight=False, soft_wrap=True)
    else:
        err.print("interrupted before anything was recorded; nothing was written", markup=False, highlight=False)
    sys.exit(130)


def families() -> dict[str, str]:
    from margin.transforms.registry import families

    return families()


def print_tables(tables: Iterable[Any]) -> None:
    for table in tables:
        console.print(table)


def fail(message: str) -> None:
    """The command's outputs are written, but it failed: one line on stderr, exit 1."""
    err.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(1)


def check_or_fail(checks: Iterable[Callable[[], None]], error: type[Exception]) -> None:
    """Run each coverage check; fail the command (exit 1) with every message that `error` gave."""
    messages = []
    for check in checks:
        try:
            check()
        except error as exc:
            messages.append(str(exc))
    if messages:
        fail(" | ".join(messages))


def say_imported_code(specs: Any) -> None:
    """Before anything runs, one line per `python:` guard naming the file it will import."""
    from margin.guards.spec import imported_code

    for spec in specs:
        line = imported_code(spec)
        if line is not None:
            err.print(line, markup=False, highlight=False, soft_wrap=True)
