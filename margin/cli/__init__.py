"""The `margin` command line: one module per command. I/O lives here; the work is in the
packages below."""

from __future__ import annotations

import sys

import typer

from margin.cli import (  # noqa: F401 (commands register on import)
    ablate,
    diff,
    export,
    integral,
    library,
    merge,
    publish,
    report,
    run,
    score,
    site,
    study,
)
from margin.cli.app import app, err
from margin.errors import InputError


def main() -> None:
    try:
        code = app(standalone_mode=False)  # a command's typer.Exit(n) comes back as n here
        if isinstance(code, int) and code:
            sys.exit(code)
    except InputError as exc:
        sys.stderr.write(f"error: {exc}\n")  # one line, never wrapped
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("aborted")
        sys.exit(130)
    except Exception as exc:
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
