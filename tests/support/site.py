"""A publish folder for the site tests: three guards' runs on the sample (quick suite), one
guard id with characters HTML and URLs treat specially, an older snapshot to archive, and a
paired study's pairings; plus small readers of what the site wrote."""

from __future__ import annotations

import datetime as dt
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from margin.reports.publish import publish
from tests.reports.test_publish import pairings_fixture
from tests.support.guards import HashGuard, ProbabilityGuard
from tests.support.runs import make_run

OLD, NEW = dt.date(2026, 9, 1), dt.date(2026, 10, 1)
ODD_ID = 'hash<b>&"x+y'  # the id HashGuard(salt='<b>&"x+y') reports


def make_publish_dir(root: Path) -> Path:
    """root/pub: the current leaderboard (three guards) and pairings, and an archived leaderboard."""
    runs = [make_run(root / "hash", HashGuard(0.5, salt="p")), make_run(root / "prob", ProbabilityGuard()),
            make_run(root / "odd", HashGuard(0.3, salt='<b>&"x+y'))]
    study = root / "study"
    study.mkdir()
    (study / "pairings.json").write_text(json.dumps(pairings_fixture()))
    pub = root / "pub"
    publish(runs[:2], pub, date=OLD, plots=False)
    publish([*runs, study], pub, date=NEW, plots=False)
    return pub


def current(pub: Path, kind: str) -> dict[str, Any]:
    """The newest dated snapshot of a kind, read straight from its immutable file."""
    newest = sorted(pub.glob(f"margin-{kind}-*.json"))[-1]
    return json.loads(newest.read_text())


class Elements(HTMLParser):
    """Every start tag as (tag, attributes), and the text inside each element with an id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))


def elements(html: str) -> list[tuple[str, dict[str, str]]]:
    parser = Elements()
    parser.feed(html)
    return parser.tags


def path_points(d: str) -> list[tuple[float, float]]:
    """The vertices of an SVG path written as M x,y L x,y ... [Z]."""
    return [(float(x), float(y)) for x, y in re.findall(r"[ML](-?[\d.]+),(-?[\d.]+)", d)]
