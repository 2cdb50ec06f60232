"""The `margin` command as a user runs it: a subprocess, with this checkout first on the path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO


def margin(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "margin", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)
