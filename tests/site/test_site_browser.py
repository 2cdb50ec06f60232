"""The site in a real headless Chromium, served by `margin site --serve`: rows and order
against the snapshot, sorting by mouse and keyboard, a row's evidence and its curve, the
pairings page's labels on hover and focus, phone width, and the endpoints as a page fetches them.

Debian's chromium and chromium-driver drive it (`.ci/run` installs them); nothing downloads a
browser: the driver and the browser are named by path, so Selenium Manager never runs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.site import current, make_publish_dir

CHROMIUM = Path(os.environ.get("MARGIN_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("MARGIN_CHROMEDRIVER", "/usr/bin/chromedriver"))
pytestmark = [
    pytest.mark.skipif(not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()),
                       reason=f"no headless browser: {CHROMIUM} and {CHROMEDRIVER} are needed "
                              "(apt-get install -y chromium chromium-driver; .ci/run installs them)"),
    pytest.mark.slow,  # each test takes about a second, but the module's setup (runs, server, browser) more
]
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,900")


@pytest.fixture(scope="module")
def pub(tmp_path_factory) -> Path:
    return make_publish_dir(tmp_path_factory.mktemp("browser-runs"))


@pytest.fixture(scope="module")
def served(pub, tmp_path_factory) -> Iterator[str]:
    """`margin site PUB --out SITE --serve --port 0`, as a user starts it; yields its URL."""
    out = tmp_path_factory.mktemp("browser-site") / "site"
    proc = subprocess.Popen([sys.executable, "-m", "margin", "site", str(pub), "--out", str(out), "--serve",
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if found := re.search(r"serving (http://127\.0\.0\.1:\d+)/", line):
                break
        else:
            pytest.fail(f"margin site --serve did not start: {proc.stderr.read() if proc.stderr else ''}")
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is a test extra (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tempfile.TemporaryDirectory(prefix="margin-chromium-")
    options.add_argument(f"--user-data-dir={profile.name}")  # a fresh profile: no state between runs
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(2)
    try:
        yield driver
    finally:
        driver.quit()
        profile.cleanup()


def errors(driver) -> list[str]:
    """Console errors since the last call: a script error or a file the page could not load."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def row_ids(driver) -> list[str]:
    return [b.get_attribute("data-id") for b in driver.find_elements("css selector", "tbody.guard")]


def test_the_leaderboard_shows_every_guard_in_rank_order_and_the_endpoints_match(browser, served, pub, tmp_path):
    browser.get(f"{served}/index.html")
    snapshot = current(pub, "guardrails")
    assert row_ids(browser) == [r["id"] for r in snapshot["data"]]
    shown = [c.text for c in browser.find_elements("css selector", "tbody.guard td[data-col=balanced_margin] .value")]
    assert shown == [f"{r['balanced_margin']:.2f}" for r in snapshot["data"]]
    browser.save_screenshot(str(tmp_path / "leaderboard.png"))
    assert (tmp_path / "leaderboard.png").stat().st_size > 10_000
    for kind in ("guardrails", "pairings"):  # as a page's script fetches them
        got = browser.execute_async_script(
            "fetch(arguments[0]).then(r => r.json().then(j => arguments[1]([r.headers.get('content-type'), j])))",
            f"/api/v1/margin/{kind}")
        expected = current(pub, kind)
        assert got[0].startswith("application/json")
        assert got[1]["meta"].pop("snapshot_url") == f"{served}/{expected['meta'].pop('snapshot_url')}"
        assert got[1] == expected
    assert errors(browser) == []


def test_every_column_sorts_by_mouse_and_by_keyboard(browser, served, pub):
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{served}/index.html")
    data = current(pub, "guardrails")["data"]
    header = browser.find_element("css selector", "th[data-key=unsafe_margin]")
    header.find_element("css selector", "button").click()
    assert header.get_attribute("aria-sort") == "descending"
    assert row_ids(browser) == [r["id"] for r in sorted(data, key=lambda r: (-r["unsafe_margin"], r["rank"]))]
    header.find_element("css selector", "button").send_keys(Keys.ENTER)  # the keyboard flips it
    assert header.get_attribute("aria-sort") == "ascending"
    assert row_ids(browser) == [r["id"] for r in sorted(data, key=lambda r: (r["unsafe_margin"], r["rank"]))]
    browser.find_element("css selector", "th[data-key=guard] button").click()
    assert row_ids(browser) == sorted((r["id"] for r in data), key=str.casefold)
    for key in ("rank", "safe_margin", "clean_balanced_accuracy", "balanced_margin"):
        browser.find_element("css selector", f"th[data-key={key}] button").click()
        assert browser.find_element("css selector", f"th[data-key={key}]").get_attribute("aria-sort")
    assert row_ids(browser) == [r["id"] for r in data]  # balanced margin, best first: the ranking again
    assert "Sorted by Balanced margin, descending" in browser.find_element("id", "sort-status").get_attribute("textContent")


def test_a_row_opens_its_evidence_with_the_curves_of_its_snapshot(browser, served, pub):
    browser.get(f"{served}/index.html")
    record = current(pub, "guardrails")["data"][1]
    body = browser.find_element("css selector", f"tbody.guard[data-id='{record['id']}']")
    details = body.find_element("css selector", "details.evidence")
    assert details.get_attribute("open") is None
    body.find_element("css selector", "th.guard-name a").click()
    assert details.get_attribute("open") is not None
    for label in ("unsafe", "safe"):
        curve = details.find_element("css selector", f"path.curve-{label}")
        assert curve.is_displayed() and curve.size["width"] > 100
        points = re.findall(r"[ML]", curve.get_attribute("d"))
        assert len(points) == 2 * len(record["curves"]["budgets"]) - 1
        assert details.find_element("css selector", f"path.band-{label}").is_displayed()
    assert "Slices by type" in details.text and "Provenance" in details.text
    assert errors(browser) == []


def test_the_pairings_page_labels_cells_and_points_on_hover_and_focus(browser, served, pub, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    browser.get(f"{served}/pairings.html")
    snapshot = current(pub, "pairings")
    cells = browser.find_elements("css selector", "table.matrix td.cell")
    assert len(cells) == len(snapshot["meta"]["guards"]) * len(snapshot["meta"]["models"])
    tested = [c for c in cells if c.get_attribute("data-status") != "untested"]
    assert sorted(c.get_attribute("data-status") for c in tested) == sorted(d["status"] for d in snapshot["data"])
    tip = tested[0].find_element("css selector", ".tip")
    assert not tip.is_displayed()
    ActionChains(browser).move_to_element(tested[0]).perform()
    assert tip.is_displayed() and "tested transformations qualify" in tip.text
    link = tested[1].find_element("css selector", "a")
    browser.execute_script("arguments[0].focus()", link)
    assert tested[1].find_element("css selector", ".tip").is_displayed()
    link.send_keys(Keys.ENTER)  # opens that pair's evidence
    target = browser.find_element("id", link.get_attribute("data-opens"))
    assert target.get_attribute("open") is not None and "Evasion" in target.text
    point = browser.find_element("css selector", "svg.ladder g.point")
    label = point.find_element("css selector", ".point-label")
    assert not label.is_displayed()
    browser.execute_script("arguments[0].focus()", point)
    assert label.is_displayed() and label.text
    browser.save_screenshot(str(tmp_path / "pairings.png"))
    assert errors(browser) == []


#: The elements of the page that stick out of the viewport sideways, less those inside a
#: container that scrolls sideways (or clips, as visually hidden text does) and those wholly
#: off to the left (the skip link until it has focus): what a phone user cannot reach.
OVERFLOWING = """
const view = document.documentElement.clientWidth;
function contained(el) {
  for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const x = getComputedStyle(p).overflowX;
    if (x === "auto" || x === "scroll" || x === "hidden" || x === "clip") return true;
  }
  return false;
}
return [...document.querySelectorAll(arguments[0])].filter(el => {
  const r = el.getBoundingClientRect();
  if (r.width === 0 && r.height === 0) return false;  // not shown (a closed tooltip)
  if (r.right <= 0) return false;
  return (r.left < -0.5 || r.right > view + 0.5) && !contained(el);
}).map(el => el.outerHTML.slice(0, 120));
"""

#: Where a figure is: shown, and inside the viewport or inside a container that scrolls to it.
UNREACHABLE = """
const view = document.documentElement.clientWidth;
function scroller(el) {
  for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
    const x = getComputedStyle(p).overflowX;
    if (x === "auto" || x === "scroll") return p;
  }
  return null;
}
return [...document.querySelectorAll(arguments[0])].filter(el => {
  const r = el.getBoundingClientRect();
  if (r.width === 0 || r.height === 0) return true;
  if (r.left >= -0.5 && r.right <= view + 0.5) return false;
  const box = scroller(el);
  return !box || el.offsetLeft + el.offsetWidth > box.scrollWidth;
}).map(el => el.outerHTML.slice(0, 120));
"""


def test_at_390_px_nothing_sticks_out_and_every_figure_is_reachable(browser, served, pub, tmp_path):
    """A phone's width (issue 35, item 8): no page is wider than the screen, nothing sticks
    out of it except inside a container that scrolls, and every figure of the leaderboard
    and every cell of the pairing matrix can be seen; screenshots of both at 390 px."""
    browser.set_window_size(390, 844)
    try:
        for page in ("index.html", "pairings.html", "methodology.html", "archive.html"):
            browser.get(f"{served}/{page}")
            page_width, view = browser.execute_script(
                "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            assert view <= 390 and page_width <= view, f"{page} is wider than the phone: {page_width} > {view}"
            assert browser.execute_script(OVERFLOWING, "body *") == [], page
        browser.get(f"{served}/index.html")
        figures = browser.find_elements("css selector", "tbody.guard td.num .value")
        guards = current(pub, "guardrails")["data"]
        assert len(figures) == 4 * len(guards) and all(f.text for f in figures)
        assert browser.execute_script(UNREACHABLE, "tbody.guard td.num, tbody.guard th.guard-name") == []
        browser.save_screenshot(str(tmp_path / "leaderboard-390.png"))
        browser.get(f"{served}/pairings.html")
        snapshot = current(pub, "pairings")
        cells = browser.find_elements("css selector", "#matrix td.cell")
        assert len(cells) == len(snapshot["meta"]["guards"]) * len(snapshot["meta"]["models"])
        assert browser.execute_script(UNREACHABLE, "#matrix td.cell, #matrix tbody th") == []
        browser.save_screenshot(str(tmp_path / "pairings-390.png"))
        assert (tmp_path / "pairings-390.png").stat().st_size > 10_000
    finally:
        browser.set_window_size(1280, 900)


def test_a_none_found_cell_does_not_read_as_safe(browser, served):
    """Not solid green: a neutral hatch with an outline and dark text, and the words."""
    browser.get(f"{served}/pairings.html")
    for selector in ("#matrix td.status-no_bypass_found", ".legend .swatch.status-no_bypass_found"):
        element = browser.find_element("css selector", selector)
        style = browser.execute_script(
            "const s = getComputedStyle(arguments[0]); return [s.backgroundImage, s.backgroundColor, s.boxShadow]",
            element)
        assert "gradient" in style[0] and style[1] in ("rgba(0, 0, 0, 0)", "transparent"), style
        assert style[2] != "none", style  # an outline, as no other status has
    cell = browser.find_element("css selector", "#matrix td.status-no_bypass_found")
    assert "none found" in cell.text
    red, green, blue = map(int, re.findall(r"\d+", browser.execute_script(
        "return getComputedStyle(arguments[0]).color", cell))[:3])
    assert max(red, green, blue) < 100  # dark text on the light hatch, not white on green


def test_the_json_endpoints_are_what_a_client_gets(served, pub):
    import urllib.request

    for kind in ("guardrails", "pairings"):
        with urllib.request.urlopen(f"{served}/api/v1/margin/{kind}", timeout=10) as response:
            assert response.headers["Content-Type"] == "application/json; charset=utf-8"
            body = json.loads(response.read())
        assert body["data"] == current(pub, kind)["data"]
