"""Where the repository and the workspace's pinned XSTest copy are."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
XSTEST_CSV = SHARED / "data" / "xstest" / "xstest_prompts.csv"


def xstest_copy() -> Path | None:
    """A local copy of the pinned XSTest file: $MARGIN_XSTEST, else the workspace's copy beside
    the checkout (absent in an outside contributor's clone)."""
    env = os.environ.get("MARGIN_XSTEST")
    path = Path(env) if env else XSTEST_CSV
    return path if path.is_file() else None
