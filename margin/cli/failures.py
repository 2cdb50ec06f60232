"""How the `margin` command ends when something goes wrong: a usage error or bad input is a
few lines and exit 2, an unexpected error one line and exit 1 (its traceback only with
`--debug` or MARGIN_DEBUG=1), Ctrl-C exit 130. Nothing here prints a traceback unless asked."""

from __future__ import annotations

import os
import sys
from typing import Any, NoReturn

import typer

from margin.errors import InputError
from margin.util.display import make_visible
from margin.util.suggest import closest

DEBUG_FLAG = "--debug"
DEBUG_ENV = "MARGIN_DEBUG"

#: The click typer parses with. typer bundles its own copy of click (so `click.ClickException`
#: is not what it raises); its BadParameter descends from whichever ClickException it uses.
CLICK_ERROR: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
USAGE_ERROR: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")


def split_debug(args: list[str]) -> tuple[list[str], bool]:
    """`--debug` taken out wherever it is (before a `--`), so `margin run ... --debug` works
    as well as `margin --debug run ...`; MARGIN_DEBUG=1 turns it on too."""
    end = args.index("--") if "--" in args else len(args)
    kept = [a for a in args[:end] if a != DEBUG_FLAG] + args[end:]
    wanted = len(kept) != len(args) or os.environ.get(DEBUG_ENV, "").strip() not in ("", "0")
    return kept, wanted


def exit_input_error(exc: InputError) -> NoReturn:
    sys.stderr.write(f"error: {make_visible(str(exc), one_line=True)}\n")  # one line, never wrapped
    sys.exit(2)


def exit_usage_error(exc: Exception) -> NoReturn:
    """A click usage error as three lines: the usage, the error (with a did-you-mean), where
    help is. Other click errors (a file it could not open) are their one line."""
    ctx: Any = getattr(exc, "ctx", None)
    lines = []
    if isinstance(exc, USAGE_ERROR) and ctx is not None:
        lines.append(ctx.get_usage())
    lines.append(f"error: {usage_message(exc, ctx)}")
    if isinstance(exc, USAGE_ERROR) and ctx is not None:
        lines.append(f"Try '{ctx.command_path} --help' for help.")
    sys.stderr.write("\n".join(make_visible(line) for line in lines) + "\n")
    sys.exit(getattr(exc, "exit_code", 2))


def usage_message(exc: Exception, ctx: Any) -> str:
    option = getattr(exc, "option_name", None)
    if type(exc).__name__ == "NoSuchOption" and option and ctx is not None:
        names = [name for param in ctx.command.params for name in (*param.opts, *param.secondary_opts)
                 if name.startswith("-")]
        hint = closest(option, names, limit=1)
        return f"no such option {option}" + (f"; did you mean {hint[0]}?" if hint else "")
    if type(exc).__name__ == "NoArgsIsHelpError" or str(getattr(exc, "message", "")) == "Missing command.":
        commands = sorted(getattr(ctx.command, "commands", {})) if ctx is not None else []
        return "missing command" + (f"; one of {', '.join(commands)}" if commands else "")
    return exc.format_message()  # type: ignore[attr-defined]


def exit_unexpected(exc: BaseException) -> NoReturn:
    """A bug or an environment problem margin did not foresee: one line, and how to see more."""
    text = make_visible(" ".join(str(exc).split()), one_line=True)
    if len(text) > 300:
        text = text[:297] + "..."
    sys.stderr.write(f"error: {type(exc).__name__}{': ' + text if text else ''}\n"
                     f"(rerun with {DEBUG_FLAG}, or MARGIN_DEBUG=1, for the traceback)\n")
    sys.exit(1)


#: The commands that write a folder as they go: each says what a Ctrl-C left once it has begun
#: writing, so one that reaches `main` came before anything was written.
WRITERS = ("run", "study", "ablate")


def exit_interrupted(command: str | None = None) -> NoReturn:
    """Ctrl-C that no command caught (while it parsed its options, loaded, or for a command
    that reads only): exit 130."""
    if command in WRITERS:
        sys.stderr.write("interrupted before anything was recorded; nothing was written\n")
    else:
        sys.stderr.write("interrupted\n")
    sys.exit(130)
