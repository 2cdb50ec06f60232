"""The `margin` command as a user runs it: a subprocess, with this checkout first on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO


def margin_env(overrides: dict[str, str | None] | None = None) -> dict[str, str]:
    """This process's environment with the checkout on the path; an override of None removes a variable."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name, value in (overrides or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def margin(*args: str, cwd: Path | None = None,
           env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "margin", *args], capture_output=True, text=True,
                          cwd=cwd, env=margin_env(env), timeout=300)
