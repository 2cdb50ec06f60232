"""`margin`'s commands, registered on the app, and how the command ends (`main`, which the
package's own `main` calls once Ctrl-C is set up)."""

from __future__ import annotations

import sys
import traceback

import typer

from margin.cli import (  # noqa: F401 (commands register on import)
    ablate,
    diff,
    export,
    integral,
    judge,
    library,
    merge,
    publish,
    report,
    run,
    score,
    site,
    study,
)
from margin.cli.app import ARGS, app
from margin.cli.failures import (
    CLICK_ERROR,
    exit_input_error,
    exit_interrupted,
    exit_unexpected,
    exit_usage_error,
    split_debug,
)
from margin.errors import InputError


def main(argv: list[str] | None = None) -> None:
    """Every way the command can end goes through here: usage errors and bad input are a few
    lines with exit 2, anything else one line with exit 1 unless --debug asks for the traceback."""
    args, debug = split_debug(sys.argv[1:] if argv is None else list(argv))
    ARGS[:] = args
    try:
        code = app(args=args, prog_name="margin", standalone_mode=False)  # typer.Exit(n) comes back as n
    except InputError as exc:
        if debug and exc.__cause__ is not None:  # what a setup error was made from
            traceback.print_exception(exc.__cause__)
        exit_input_error(exc)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        exit_interrupted(args[0] if args else None)
    except Exception as exc:
        if isinstance(exc, CLICK_ERROR):
            exit_usage_error(exc)
        if debug:
            raise
        exit_unexpected(exc)
    if code == 130:  # a Ctrl-C no command caught, which typer returns as 130 without a word
        exit_interrupted(args[0] if args else None)
    if isinstance(code, int) and code:
        sys.exit(code)
