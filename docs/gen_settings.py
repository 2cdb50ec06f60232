"""Write the settings tables in docs/engine.md and README.md from margin/engine/settings.py.

    python docs/gen_settings.py            # rewrite the tables between their markers
    python docs/gen_settings.py --check    # exit 1 if a committed table is stale

Each page holds one table between `<!-- settings:KIND ... -->` and `<!-- /settings -->`;
everything else on the page is left as it is. tests/test_docs_settings.py checks that the
committed tables are exactly this script's output.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from margin.engine.settings import SETTINGS, Setting  # noqa: E402

PAGES = {"full": REPO / "docs" / "engine.md", "limits": REPO / "README.md"}
BLOCK = re.compile(r"(<!-- settings:(?P<kind>\w+)[^\n]*-->\n)(?P<body>.*?)(<!-- /settings -->)", re.S)


def code(text: str | None) -> str:
    return f"`{text}`" if text else "—"


def default(setting: Setting) -> str:
    words = setting.default_text()
    return f"`{words}`" if isinstance(setting.default, str) else words  # a name, as typed


def full_table() -> list[str]:
    """Every setting: where it is set and what it does."""
    rows = ["| setting | CLI flag | `backend_options` key | study `runtime:` key | default | meaning |",
            "| --- | --- | --- | --- | --- | --- |"]
    for s in SETTINGS:
        meaning = s.help.replace("|", "\\|")  # a pipe inside a cell
        rows.append(f"| `{s.name}` | {code(s.flag)} | {code(s.option)} | {code(s.runtime)} | {default(s)} "
                    f"| {meaning} |")
    return rows


def limits_table() -> list[str]:
    """The endpoint limits only (a guard file's and a study model's `backend_options`)."""
    rows = ["| `backend_options` | flag | study `runtime:` | default |", "| --- | --- | --- | --- |"]
    for s in SETTINGS:
        if s.option is not None:
            rows.append(f"| `{s.option}` | {code(s.flag)} | {code(s.runtime)} | {default(s)} |")
    return rows


TABLES = {"full": full_table, "limits": limits_table}


def render(page: str) -> str:
    """`page` with each settings block's table written afresh."""
    def fill(match: re.Match[str]) -> str:
        kind = match["kind"]
        if kind not in TABLES:
            raise SystemExit(f"unknown settings table {kind!r}; expected one of {', '.join(TABLES)}")
        return match.group(1) + "\n".join(TABLES[kind]()) + "\n" + match.group(4)

    return BLOCK.sub(fill, page)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a committed table is stale")
    args = parser.parse_args()
    stale = []
    for kind, path in PAGES.items():
        page = path.read_text("utf-8")
        if f"<!-- settings:{kind}" not in page:
            raise SystemExit(f"{path} has no <!-- settings:{kind} --> block")
        fresh = render(page)
        if fresh != page:
            stale.append(path.name)
            if not args.check:
                path.write_text(fresh, "utf-8")
    if args.check and stale:
        print(f"stale: {', '.join(stale)}; run: python docs/gen_settings.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
