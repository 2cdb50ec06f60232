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

XSTEST_COMPLETIONS = SHARED / "data" / "xstest-completions"
COMPLETION_FILES = ("xstest_v2_completions_gpt4.csv", "xstest_v2_completions_llama2new.csv",
                    "xstest_v2_completions_mistralguard.csv")


def xstest_completions() -> list[Path] | None:
    """The workspace's three labelled XSTest completion files ($MARGIN_XSTEST_COMPLETIONS, a
    folder, else the copy beside the checkout); None where any is absent."""
    env = os.environ.get("MARGIN_XSTEST_COMPLETIONS")
    folder = Path(env) if env else XSTEST_COMPLETIONS
    paths = [folder / name for name in COMPLETION_FILES]
    return paths if all(p.is_file() for p in paths) else None
