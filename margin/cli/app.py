"""The typer apps, the options every command takes (--version, --debug) and the consoles
every command prints to."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from margin.util.display import make_visible

# A group named without a command is a usage error (usage + "missing command", exit 2), not its help.
app = typer.Typer(add_completion=False, no_args_is_help=False, pretty_exceptions_enable=False,
                  help="How much must a prompt change before a guardrail gets it wrong?")
transforms_app = typer.Typer(no_args_is_help=False, help="The costed transformation library.")
guards_app = typer.Typer(no_args_is_help=False, help="Guards margin can evaluate.")
app.add_typer(transforms_app, name="transforms")
app.add_typer(guards_app, name="guards")

#: The command line as typed (after `margin`), for messages that repeat it (Ctrl-C's resume command).
ARGS: list[str] = []

#: Columns for output that is not a terminal (`| less`, `> file`, a CI log), unless $COLUMNS
#: says otherwise: every table as wide as its contents, so no name is ever cut to `contrast_d…`.
UNCUT = 100_000


def _width(stream: object) -> int | None:
    """None (rich asks the terminal) on a terminal or with $COLUMNS; else wide enough for anything."""
    isatty = getattr(stream, "isatty", None)
    if os.environ.get("COLUMNS") or (isatty is not None and isatty()):
        return None
    return UNCUT


class VisibleConsole(Console):
    """A console that shows control and format characters as `<U+XXXX>` in every string it
    prints, table cells included, before rich lays them out and adds its own styling: an id or
    caveat from a file can never drive the terminal or reorder a line."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(make_visible(text), **kwargs)


console = VisibleConsole(width=_width(sys.stdout))
err = VisibleConsole(stderr=True, width=_width(sys.stderr))


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("margin")
    except PackageNotFoundError:  # a source tree on PYTHONPATH, never installed
        return "unknown (not installed)"


def _show_version(wanted: bool) -> None:
    if wanted:
        console.print(f"margin {version()}", markup=False, highlight=False)
        raise typer.Exit(0)


@app.callback()
def options(
    show_version: Annotated[bool, typer.Option("--version", is_eager=True, callback=_show_version,
                                               help="print margin's version and exit")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="show the traceback of an unexpected error "
                                                       "(also MARGIN_DEBUG=1; may follow the command)")] = False,
) -> None:
    """How much must a prompt change before a guardrail gets it wrong?"""
