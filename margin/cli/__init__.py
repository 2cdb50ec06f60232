"""The `margin` command line: one module per command. I/O lives here; the work is in the
packages below.

This module stays light: `main` sets Ctrl-C up (margin.util.interrupts) before it imports the
commands, so Ctrl-C at any moment, even while they load, exits 130 without a traceback."""

from __future__ import annotations

import sys
from typing import NoReturn


def main(argv: list[str] | None = None) -> None:
    """The `margin` program (argv None: its command line), or one command in this process."""
    if argv is not None:  # called from Python (a test): this process's Ctrl-C stays its own
        from margin.cli.entry import main as entry

        entry(argv)
        return
    from margin.util import interrupts

    interrupts.install()
    try:
        from margin.cli.entry import main as entry

        entry(None)
    except KeyboardInterrupt:  # while the commands load, before any could write
        sys.stderr.write("interrupted before anything was recorded; nothing was written\n")
        _exit_interrupted()
    except SystemExit as exc:
        if exc.code == 130:
            _exit_interrupted()
        raise


def _exit_interrupted() -> NoReturn:
    """Exit 130, for certain. CPython itself ends a process by SIGINT (status -2, not 130)
    once a KeyboardInterrupt has left code an extension ran through PyRun_*, even one caught
    since (seen here about one time in five when Ctrl-C comes while the commands load).
    Everything a clean exit runs at exit runs first (Ray's shutdown among it)."""
    import atexit
    import os

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(130)
