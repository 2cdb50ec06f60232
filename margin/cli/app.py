"""The typer apps and the consoles every command prints to."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="How much must a prompt change before a guardrail gets it wrong?")
transforms_app = typer.Typer(no_args_is_help=True, help="The costed transformation library.")
guards_app = typer.Typer(no_args_is_help=True, help="Guards margin can evaluate.")
app.add_typer(transforms_app, name="transforms")
app.add_typer(guards_app, name="guards")

console = Console()
err = Console(stderr=True)
