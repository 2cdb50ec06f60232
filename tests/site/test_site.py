"""`margin site`: the static folder, its endpoints, its pages read without a browser, the SVG
geometry against the snapshot's figures, archives, bad input, and the preview server."""

from __future__ import annotations

import json
import shutil
import threading
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from margin.errors import InputError
from margin.site.build import build_site
from margin.site.inputs import load_publish_dir
from margin.site.pages import anchor
from margin.site.serve import make_server
from margin.site.svg import share_colour, step_points
from tests.support.cli import margin
from tests.support.site import NEW, ODD_ID, OLD, current, elements, make_publish_dir, path_points

BASE = "https://example.org/margin"


@pytest.fixture(scope="module")
def pub(tmp_path_factory) -> Path:
    return make_publish_dir(tmp_path_factory.mktemp("site-runs"))


@pytest.fixture(scope="module")
def site(pub, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    build_site(pub, out, BASE)
    return out


def copy_of(pub: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "pub"
    shutil.copytree(pub, dest)
    for path in dest.iterdir():
        path.chmod(0o644)  # publish leaves snapshots read-only; these tests edit copies
    return dest


def test_endpoints_hold_the_snapshots_unchanged_but_for_the_pinned_url(pub, site):
    for kind in ("guardrails", "pairings"):
        snapshot = current(pub, kind)
        name = snapshot["meta"]["snapshot_url"]
        assert (site / name).read_bytes() == (pub / name).read_bytes()  # the immutable file, byte for byte
        for endpoint in (f"api/v1/margin/{kind}", f"api/v1/margin/{kind}.json"):
            served = json.loads((site / endpoint).read_text())
            assert served["meta"]["snapshot_url"] == f"{BASE}/{name}"
            served["meta"]["snapshot_url"] = snapshot["meta"]["snapshot_url"]
            assert served == snapshot
            assert list(served["meta"]) == list(snapshot["meta"])  # key order kept too


def test_without_a_base_url_the_pinned_url_is_relative_to_the_endpoint(pub, tmp_path):
    build_site(pub, tmp_path / "s")
    served = json.loads((tmp_path / "s" / "api/v1/margin/guardrails").read_text())
    resolved = urljoin("http://host/prefix/api/v1/margin/guardrails", served["meta"]["snapshot_url"])
    name = current(pub, "guardrails")["meta"]["snapshot_url"]
    assert resolved == f"http://host/prefix/{name}" and (tmp_path / "s" / name).is_file()


def test_the_leaderboard_table_is_in_the_html_in_rank_order_with_two_decimals(pub, site):
    html = (site / "index.html").read_text()
    tags = elements(html)
    bodies = [attrs for tag, attrs in tags if tag == "tbody" and "guard" in attrs.get("class", "")]
    snapshot = current(pub, "guardrails")
    assert [b["data-id"] for b in bodies] == [r["id"] for r in snapshot["data"]]
    assert len(bodies) == 3 and ODD_ID in [b["data-id"] for b in bodies]
    for record in snapshot["data"]:
        low, high = record["confidence_intervals"]["balanced_margin"]
        assert f'<span class="value">{record["balanced_margin"]:.2f}</span> ' \
               f'<span class="ci">[{low:.2f}, {high:.2f}]</span>' in html
    assert "hash&lt;b&gt;&amp;&#34;x+y" in html and "<b>&" not in html  # the odd id is escaped, never markup
    headers = [a for t, a in tags if t == "th" and "data-key" in a]
    assert [h["data-key"] for h in headers] == ["rank", "guard", "balanced_margin", "unsafe_margin",
                                                "safe_margin", "clean_balanced_accuracy"]


def test_every_page_loads_only_files_of_the_site_and_every_fragment_exists(site):
    pages = sorted(site.glob("*.html"))
    assert {p.name for p in pages} >= {"index.html", "pairings.html", "methodology.html", "archive.html"}
    for page in pages:
        tags = elements(page.read_text())
        ids = {a["id"] for _, a in tags if "id" in a}
        for tag, attrs in tags:
            for key in ("href", "src"):
                if key not in attrs:
                    continue
                url = urlsplit(attrs[key])
                if tag in ("script", "link", "img"):  # inline data: is no load; anything else must be ours
                    assert url.scheme in ("", "data") and not url.netloc, f"{page.name} loads {attrs[key]} from elsewhere"
                if url.scheme or url.netloc:
                    continue
                target = site / unquote(url.path) if url.path else page
                assert target.is_file(), f"{page.name}: {attrs[key]} is not in the site"
                if url.fragment and target == page:
                    assert unquote(url.fragment) in ids, f"{page.name}: no element #{url.fragment}"


def test_drawn_curves_enclose_exactly_the_margins_of_the_snapshot(pub, site):
    """Area under each drawn step path / plot area = class margin / 100 (the snapshot's identity)."""
    html = (site / "index.html").read_text()
    tags = elements(html)
    frames = [a for t, a in tags if t == "rect" and a.get("class") == "plot-area"]
    curves = [a for t, a in tags if t == "path" and a.get("class", "").startswith("curve ")]
    snapshot = current(pub, "guardrails")
    assert len(curves) == 2 * len(snapshot["data"])
    for k, record in enumerate(snapshot["data"]):
        frame = frames[k]
        x0, y0, width, height = (float(frame[key]) for key in ("x", "y", "width", "height"))
        for path in curves[2 * k: 2 * k + 2]:
            label = path["data-class"]
            points = path_points(path["d"])
            assert len(points) == 2 * len(record["curves"]["budgets"]) - 1
            area = sum((xb - xa) * (y0 + height - ya) for (xa, ya), (xb, _) in zip(points, points[1:], strict=False))
            assert area / (width * height) * 100 == pytest.approx(record[f"{label}_margin"], abs=0.02)


@given(st.lists(st.tuples(st.floats(0.01, 10), st.floats(0, 1)), min_size=1, max_size=12))
def test_step_points_are_right_continuous_steps_whose_area_is_the_step_sum(steps):
    budgets = [0.0]
    for gap, _ in steps:
        budgets.append(budgets[-1] + gap)
    values = [v for _, v in steps] + [0.0]
    points = step_points(budgets, values)
    assert points[0] == (0.0, values[0]) and points[-1] == (budgets[-1], 0.0)
    area = sum((xb - xa) * ya for (xa, ya), (xb, _) in zip(points, points[1:], strict=False))
    assert area == pytest.approx(sum(values[k] * (budgets[k + 1] - budgets[k]) for k in range(len(steps))))
    assert all(a[0] <= b[0] for a, b in zip(points, points[1:], strict=False))  # never steps back in b


@given(st.text(max_size=8), st.text(max_size=8))
def test_anchors_are_safe_in_html_ids_and_urls_and_keep_ids_apart(a, b):
    assert anchor("guard", a).replace("-", "").replace("_", "").isascii()
    assert all(c.isalnum() or c in "-_" for c in anchor("guard", a))
    if a != b:
        assert anchor("guard", a) != anchor("guard", b)


def test_share_colours_run_from_green_to_red():
    assert share_colour(0.0) == "#27ae60" and share_colour(1.0) == "#b03a2e" and share_colour(0.5) == "#e67e22"


def test_the_pairings_page_shows_every_pair_and_the_ladder(pub, site):
    snapshot = current(pub, "pairings")
    tags = elements((site / "pairings.html").read_text())
    cells = {(a["data-model"], a["data-status"]) for t, a in tags if t == "td" and "cell" in a.get("class", "")}
    guards, models = snapshot["meta"]["guards"], snapshot["meta"]["models"]
    assert len([a for t, a in tags if t == "td" and "cell" in a.get("class", "")]) == len(guards) * len(models)
    statuses = {d["status"] for d in snapshot["data"]}
    assert {s for _, s in cells} == statuses | {"untested"}  # one pair of the fixture is untested
    points = [a for t, a in tags if t == "g" and a.get("class") == "point"]
    assert {p["data-model"] for p in points} == {m["id"] for m in models}
    assert all(p["tabindex"] == "0" and p["aria-label"] for p in points)
    for model in models:
        tested = [d for d in snapshot["data"] if d["model_id"] == model["id"]]
        share = sum(d["status"] == "bypass_found" for d in tested) / len(tested)
        assert float(next(p for p in points if p["data-model"] == model["id"])["data-share"]) == share
    evidence = [a["id"] for t, a in tags if t == "details"]
    assert evidence == [anchor("pair", d["guard_id"], d["model_id"]) for g in guards for m in
                        sorted(models, key=lambda m: m["capability_index"]) for d in snapshot["data"]
                        if (d["guard_id"], d["model_id"]) == (g["id"], m["id"])]


def test_older_snapshots_stay_as_archives_under_their_immutable_names(pub, site):
    inputs = load_publish_dir(pub)
    older = inputs.archives("guardrails")
    assert [s.date for s in older] == [OLD.isoformat()] and inputs.current("guardrails").date == NEW.isoformat()
    archived = (site / f"{older[0].stem}.html").read_text()
    assert "An archived snapshot of 2026-09-01" in archived
    assert (site / older[0].name).read_bytes() == (pub / older[0].name).read_bytes()
    listing = (site / "archive.html").read_text()
    assert all(s.name in listing for s in inputs.all())
    endpoint = json.loads((site / "api/v1/margin/guardrails").read_text())
    assert endpoint["meta"]["snapshot_date"] == NEW.isoformat()


def test_the_methodology_page_comes_from_the_snapshots_meta(pub, site):
    html = (site / "methodology.html").read_text()
    meta = current(pub, "guardrails")["meta"]
    for fact in (meta["protocol"], meta["provenance"]["dataset"]["sha256"], meta["provenance"]["suite"]["sha256"],
                 f'{meta["provenance"]["corpus_mean_length"]:.2f}', str(meta["confidence_intervals"]["replicates"]),
                 current(pub, "pairings")["meta"]["judge"]["model"], "margin-paired-study/1"):
        assert fact in html


def test_a_rebuild_replaces_the_folder_whole(pub, tmp_path):
    out = tmp_path / "site"
    build_site(pub, out)
    (out / "stale.html").write_text("left from before")
    only_old = tmp_path / "old-only"
    only_old.mkdir()
    old = next(p for p in pub.glob("margin-guardrails-*.json") if OLD.isoformat() in p.name)
    shutil.copy(old, only_old / old.name)
    build_site(only_old, out)
    assert not (out / "stale.html").exists() and not (out / "pairings.html").exists()
    assert json.loads((out / "api/v1/margin/guardrails").read_text())["meta"]["snapshot_date"] == OLD.isoformat()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".site")]  # no temporary folder left


def snapshot_files(pub: Path) -> dict[str, Path]:
    return {("old" if OLD.isoformat() in p.name else "new"): p for p in pub.glob("margin-guardrails-*.json")}


def bad_cases():
    def empty(pub: Path) -> str:
        for p in list(pub.iterdir()):
            p.unlink()
        return "no snapshot here"

    def torn(pub: Path) -> str:
        path = snapshot_files(pub)["new"]
        path.write_text(path.read_text()[:500])
        return f"{path}:1: invalid JSON"

    def edited(pub: Path) -> str:
        path = snapshot_files(pub)["old"]
        body = json.loads(path.read_text())
        body["data"][0]["balanced_margin"] += 1.0
        body["data"][0]["rank"] = 1
        path.write_text(json.dumps(body))
        return f"{path}: content does not match the hash in its name"

    def missing_field(pub: Path) -> str:
        path = pub / "pairings.json"
        body = json.loads(path.read_text())
        del body["data"][0]["status"]
        path.write_text(json.dumps(body))
        return f"{path} [data.0.status]"

    def mixed_protocols(pub: Path) -> str:
        body = json.loads(snapshot_files(pub)["new"].read_text())
        body["meta"]["protocol"] = "margin-adaptive-flip-cost/1"
        for record in body["data"]:
            record["evaluation"]["search"] = "adaptive"
        from margin.reports.publish import address

        name, body = address(body, "guardrails", None)
        (pub / name).write_text(json.dumps(body))
        return "snapshots of different protocols are all current (dated 2026-10-01)"

    def adaptive_record(pub: Path) -> str:
        path = pub / "guardrails.json"
        body = json.loads(path.read_text())
        body["data"][1]["evaluation"]["search"] = "adaptive"
        path.write_text(json.dumps(body))
        return f"{path} [data[1].evaluation.search]: guard {body['data'][1]['id']!r} was measured with an adaptive search"

    def two_current(pub: Path) -> str:
        body = json.loads(snapshot_files(pub)["new"].read_text())
        body["meta"]["methodology"] += " Again."
        from margin.reports.publish import address

        name, body = address(body, "guardrails", None)
        (pub / name).write_text(json.dumps(body))
        (pub / "guardrails.json").unlink()
        return "2 guardrails snapshots dated 2026-10-01 and no guardrails.json naming one of them"

    def curve_off_budget(pub: Path) -> str:
        path = pub / "guardrails.json"
        body = json.loads(path.read_text())
        body["data"][0]["curves"]["safe"].append(0.0)
        path.write_text(json.dumps(body))
        return "[data[0].curves.safe]"

    return [empty, torn, edited, missing_field, mixed_protocols, adaptive_record, two_current, curve_off_budget]


@pytest.mark.parametrize("spoil", bad_cases(), ids=lambda f: f.__name__)
def test_bad_input_is_one_error_naming_the_file_and_nothing_written(pub, tmp_path, spoil):
    spoiled = copy_of(pub, tmp_path)
    expected = spoil(spoiled)
    with pytest.raises(InputError) as error:
        build_site(spoiled, tmp_path / "out")
    assert expected in str(error.value)
    assert not (tmp_path / "out").exists()


def test_the_command_says_it_on_one_line_and_exits_2(pub, tmp_path):
    spoiled = copy_of(pub, tmp_path)
    expected = bad_cases()[1](spoiled)
    proc = margin("site", str(spoiled), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and proc.stderr == f"error: {proc.stderr[7:]}" and proc.stderr.count("\n") == 1
    assert expected in proc.stderr and not (tmp_path / "out").exists()


def test_a_folder_margin_did_not_build_is_never_replaced(pub, tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="refusing to replace it"):
        build_site(pub, precious)
    assert [p.name for p in precious.iterdir()] == ["notes.txt"]


def test_the_preview_server_serves_the_endpoints_as_json(site):
    server = make_server(site, 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        root = f"http://127.0.0.1:{server.server_port}"
        for path, kind in (("/api/v1/margin/guardrails", "application/json"), ("/api/v1/margin/pairings", "application/json"),
                           ("/index.html", "text/html"), ("/assets/site.css", "text/css")):
            with urllib.request.urlopen(root + path, timeout=10) as response:
                assert response.headers["Content-Type"].startswith(kind), path
                body = response.read()
            assert body == (site / path.lstrip("/")).read_bytes()
        with urllib.request.urlopen(root + "/api/v1/margin/pairings", timeout=10) as response:
            assert response.headers["Access-Control-Allow-Origin"] == "*"
    finally:
        server.shutdown()
        server.server_close()


def test_a_snapshot_with_only_the_required_fields_still_makes_every_page(pub, tmp_path):
    """Optional fields (intervals, slices, evaluation details, model sizes, names, evidence,
    thresholds left to their defaults) may be absent; the pages then say less, never fail."""
    bare = tmp_path / "bare"
    bare.mkdir()
    board = current(pub, "guardrails")
    for key in ("units", "confidence_intervals"):
        del board["meta"][key]
    board["meta"]["provenance"] = {k: board["meta"]["provenance"][k] for k in ("dataset", "suite", "budget")}
    for record in board["data"]:
        for key in ("confidence_intervals", "clean_accuracy", "slices"):
            del record[key]
        record["evaluation"] = {}
        del record["curves"]["bands"]
    pairs = current(pub, "pairings")
    pairs["meta"].update(thresholds={}, guards=[{"id": g["id"]} for g in pairs["meta"]["guards"]],
                         models=[{"id": m["id"]} for m in pairs["meta"]["models"]])
    for pair in pairs["data"]:
        del pair["transformations"]
    (bare / "guardrails.json").write_text(json.dumps(board))
    (bare / "pairings.json").write_text(json.dumps(pairs))
    _, files = build_site(bare, tmp_path / "site")
    assert f'<span class="value">{board["data"][0]["balanced_margin"]:.2f}</span>' in files["index.html"]
    assert "None recorded for this guard" in files["index.html"]
    assert "no ladder to draw" in files["pairings.html"] and "at least 97%" in files["pairings.html"]
    assert "97.0%" in files["methodology.html"]


def test_a_port_in_use_is_one_error_and_nothing_written(pub, tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = margin("site", str(pub), "--out", str(tmp_path / "out"), "--serve", "--port", str(port))
    assert proc.returncode == 2 and f"--port: cannot listen on 127.0.0.1:{port}" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_the_leaderboard_labels_exactly_the_headline_figures():
    from margin.site.pages import COLUMNS, FIGURE_LABELS
    from margin.types import HEADLINE_FIGURES

    assert tuple(FIGURE_LABELS) == HEADLINE_FIGURES
    assert [c.key for c in COLUMNS[2:]] == list(HEADLINE_FIGURES)


TRAVERSAL = "2026-12-04/../../../../ESCAPED"


@pytest.mark.parametrize("kind", ["pairings", "guardrails"])
def test_a_traversal_date_in_a_snapshot_is_refused_and_nothing_written_outside(pub, tmp_path, kind):
    """A latest copy (pairings.json, guardrails.json) names no date in its file name, so its
    meta.snapshot_date alone would make the immutable file's name (issue 34)."""
    spoiled = copy_of(pub, tmp_path / "deep" / "er")
    path = spoiled / f"{kind}.json"
    body = json.loads(path.read_text())
    body["meta"]["snapshot_date"] = TRAVERSAL
    path.write_text(json.dumps(body))
    out = tmp_path / "deep" / "er" / "site"
    proc = margin("site", str(spoiled), "--out", str(out))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert f"{path} [meta.snapshot_date]" in proc.stderr and "YYYY-MM-DD" in proc.stderr
    assert not out.exists() and not [p for p in tmp_path.rglob("*ESCAPED*")]


@pytest.mark.parametrize(("where", "value"), [
    (lambda body: body["data"][0], "../../x"),
    (lambda body: body["meta"]["guards"][0], ".."),
])
def test_an_id_that_could_be_a_path_is_refused(pub, tmp_path, where, value):
    spoiled = copy_of(pub, tmp_path)
    path = spoiled / "pairings.json"
    body = json.loads(path.read_text())
    record = where(body)
    record["guard_id" if "guard_id" in record else "id"] = value
    path.write_text(json.dumps(body))
    with pytest.raises(InputError, match="is no id") as error:
        build_site(spoiled, tmp_path / "out")
    assert str(path) in str(error.value)


def test_a_traversal_guard_id_in_a_leaderboard_snapshot_is_refused(pub, tmp_path):
    spoiled = copy_of(pub, tmp_path)
    path = spoiled / "guardrails.json"
    body = json.loads(path.read_text())
    body["data"][0]["id"] = "../../index"
    path.write_text(json.dumps(body))
    with pytest.raises(InputError, match=r"\[data\.0\.id\].*is no id"):
        build_site(spoiled, tmp_path / "out")
