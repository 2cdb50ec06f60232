"""Control characters from input (C0, C1, ESC sequences, bidi overrides) in guard ids, prompt
ids, slice values and caveats are shown as <U+XXXX> wherever margin shows text to a person —
`margin run`, `report`, `diff`, `check`, error lines, the site's pages, the plots — and the
JUnit export and SVG plots stay well-formed XML (parsed by expat here), while the data files
keep the exact text."""

from __future__ import annotations

import csv
import json
import xml.dom.minidom
from pathlib import Path

import pytest

from margin.util.display import make_visible
from tests.support.cli import margin
from tests.support.paths import REPO

ESC = "\x1b"
TITLE = f"{ESC}]0;pwned\x07"  # sets the terminal's window title
CLEAR = f"{ESC}[2J"  # clears the screen
C1_CSI, RLO, RLI = "\x9b", "\u202e", "\u2067"
RAW = (ESC, "\x07", C1_CSI, RLO, RLI)
GUARD_ID = f"kw{TITLE}{RLO}evil"
PROMPT_SUFFIX = f"{TITLE}{RLO}{C1_CSI}2J{RLI}"
WIDE = {"COLUMNS": "400"}  # tables wide enough to show whole ids


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, str]:
    """A keyword-guard run on the sample whose ids, slice values and caveat hold control characters."""
    root = tmp_path_factory.mktemp("hostile")
    rows = list(csv.DictReader((REPO / "margin" / "data" / "sample.csv").open(encoding="utf-8")))
    for i, row in enumerate(rows):
        if i % 4 == 0:
            row["id"] += PROMPT_SUFFIX
        if i % 3 == 0:
            row["type"] = CLEAR + row["type"]
    with (root / "hostile.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (root / "g.yaml").write_text('guard: keyword\nid: "kw\\e]0;pwned\\a\\u202eevil"\ncaveats: ["\\e[31mred caveat"]\n')
    proc = margin("run", "--guard", str(root / "g.yaml"), "--dataset", str(root / "hostile.csv"), "--suite", "quick",
                  "--engine", "local", "--no-cache", "--out", str(root / "run"))
    assert proc.returncode == 0, proc.stderr
    return root, proc.stdout + proc.stderr


def assert_shown(text: str) -> None:
    assert [ch for ch in RAW if ch in text] == []
    assert "<U+001B>" in text


def test_make_visible_escapes_c0_c1_esc_and_bidi_and_one_line_escapes_newlines():
    assert make_visible(f"a{TITLE}{C1_CSI}{RLO}{RLI}b") == "a<U+001B>]0;pwned<U+0007><U+009B><U+202E><U+2067>b"
    assert make_visible("a\nb\tc") == "a\nb\tc" and make_visible("a\nb\tc", one_line=True) == "a<U+000A>b<U+0009>c"


def test_the_data_files_keep_the_exact_text(hostile):
    root, _ = hostile
    results = [json.loads(line) for line in (root / "run" / "results.jsonl").read_text().splitlines()]
    assert sum(r["prompt_id"].endswith(PROMPT_SUFFIX) for r in results) == 12
    assert json.loads((root / "run" / "run.json").read_text())["guard"]["id"] == GUARD_ID


def test_run_report_diff_and_check_show_them_escaped(hostile):
    root, printed = hostile
    assert_shown(printed)
    assert "kw<U+001B>]0;pwned<U+0007><U+202E>evil" in printed and "<U+001B>[31mred caveat" in printed
    run = str(root / "run")
    for command in (("report", run), ("diff", run, run), ("check", run, "--baseline", run)):
        proc = margin(*command, env=WIDE)
        assert proc.returncode == 0, (command, proc.stderr)
        assert_shown(proc.stdout + proc.stderr)
    report = margin("report", run, env=WIDE).stdout
    assert "<U+202E><U+009B>2J<U+2067>" in report  # a prompt id in the flips table
    assert "<U+001B>[2J" in report  # a slice value


def test_an_error_line_shows_them_escaped_and_stays_one_line(tmp_path):
    for name in (f"kw{TITLE}{RLO}.yaml", f"kw\nerror: forged{CLEAR}.yaml"):
        proc = margin("run", "--guard", str(tmp_path / name), "--out", str(tmp_path / "out"))
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
        assert_shown(proc.stderr)


def test_the_junit_export_and_the_plots_are_well_formed_xml(hostile, tmp_path):
    root, _ = hostile
    out = tmp_path / "junit.xml"
    proc = margin("export", str(root / "run"), "--format", "junit", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    document = xml.dom.minidom.parse(str(out))  # expat: raises on any character XML 1.0 forbids
    names = [s.getAttribute("name") for s in document.getElementsByTagName("testsuite")]
    assert names == [f"margin.{make_visible(GUARD_ID)}.unsafe", f"margin.{make_visible(GUARD_ID)}.safe"]
    xml.dom.minidom.parse(str(root / "run" / "curves.svg"))


def test_the_site_pages_show_them_escaped_and_its_api_keeps_them(hostile, tmp_path):
    root, _ = hostile
    pub, site = tmp_path / "pub", tmp_path / "site"
    assert margin("publish", str(root / "run"), "--out", str(pub)).returncode == 0
    proc = margin("site", str(pub), "--out", str(site))
    assert proc.returncode == 0, proc.stderr
    pages = sorted(site.rglob("*.html"))
    assert pages
    for page in pages:
        assert [ch for ch in RAW if ch in page.read_text(encoding="utf-8")] == [], page.name
    assert "kw&lt;U+001B&gt;]0;pwned&lt;U+0007&gt;&lt;U+202E&gt;evil" in (site / "index.html").read_text()
    api = [json.loads(p.read_text()) for p in site.rglob("*.json") if "guardrails" in p.name]
    assert api and all(s["data"][0]["id"] == GUARD_ID for s in api)
