"""The site reads each snapshot into its model (`Snapshot`, `Pairings`) and renders from it
by attribute; only the endpoints are written from the file's own JSON, so they keep its bytes' order."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from margin.reports.pairings import Pairings, PairTransformation
from margin.reports.snapshot_schema import Snapshot
from margin.site.build import build_site, site_files
from margin.site.inputs import SiteInputs, load_publish_dir
from margin.site.pages import Pages
from tests.support.site import elements, make_publish_dir


@pytest.fixture(scope="module")
def pub(tmp_path_factory) -> Path:
    return make_publish_dir(tmp_path_factory.mktemp("site-models"))


def test_each_published_file_holds_its_model(pub):
    inputs = load_publish_dir(pub)
    board, pairs = inputs.current("guardrails"), inputs.current("pairings")
    assert isinstance(board.snapshot, Snapshot) and isinstance(pairs.pairings, Pairings)
    assert board.snapshot.document() == json.loads(board.text)
    with pytest.raises(TypeError, match="not pairings"):
        board.pairings  # noqa: B018 - the property raises
    with pytest.raises(TypeError, match="not a leaderboard"):
        pairs.snapshot  # noqa: B018


def test_an_endpoint_keeps_the_files_key_order_where_the_model_would_write_another(pub, tmp_path):
    """Key order is not in a snapshot's hash (canonical JSON sorts keys): a file that lists a
    record's fields in another order is the same snapshot, and its endpoint keeps that order."""
    copy = tmp_path / "pub"
    shutil.copytree(pub, copy)
    name = json.loads((copy / "guardrails.json").read_text())["meta"]["snapshot_url"]
    for path in (copy / name, copy / "guardrails.json"):
        path.chmod(0o644)
        body = json.loads(path.read_text())
        body["data"] = [dict(reversed(record.items())) for record in body["data"]]
        path.write_text(json.dumps(body))
    inputs = load_publish_dir(copy)
    assert inputs.current("guardrails").name == name  # the same content, so the same name
    model_order = list(inputs.current("guardrails").snapshot.document()["data"][0])
    assert model_order[0] == "id"  # the model writes its declared order ...
    _, files = build_site(copy, tmp_path / "site")
    served = json.loads(files["api/v1/margin/guardrails"])
    assert list(served["data"][0]) == model_order[::-1]  # ... the endpoint the file's
    assert files[name] == (copy / name).read_text()


def test_the_pairings_page_reads_the_model_it_holds_and_the_endpoint_the_file(pub):
    """Change the pairings model in memory, not its file: the page shows the change (names,
    the ladder order, a transformation's rates, interval and undefined rate, by attribute);
    the endpoint, written from the file's own JSON, does not."""
    inputs = load_publish_dir(pub)
    snap = inputs.current("pairings")
    pairings = snap.pairings
    meta = pairings.meta
    guards = [g.model_copy(update={"name": "Renamed guard"}) if g.id == "kw" else g for g in meta.guards]
    models = [m.model_copy(update={"capability_index": 20}) if m.id == "small" else m for m in meta.models]
    row = PairTransformation.model_validate({
        "name": "homoglyph", "evasion": 0.5, "regression": 0.0, "preservation": 0.8, "qualifies": False,
        "ci": {"evasion": [0.25, 0.75]}, "defined": {"regression": False}})
    data = [d.model_copy(update={"transformations": [row, *d.transformations[1:]]})
            if (d.guard_id, d.model_id) == ("kw", "big") else d for d in pairings.data]
    changed = pairings.model_copy(update={"meta": meta.model_copy(update={"guards": guards, "models": models}),
                                          "data": data})
    held = replace(snap, model=changed)
    html = Pages(inputs).pairings(held)
    assert "Renamed guard" in html and "keyword" not in html
    columns = [a["data-model"] for t, a in elements(html) if t == "th" and "data-model" in a]
    assert columns == ["big", "small"]  # small's capability index is now above big's
    assert "index 20</span>" in html
    assert '<th scope="row">homoglyph</th>\n<td>50.0% <span class="ci">[25.0, 75.0]</span></td>' in html
    assert "<td>— <span class=\"ci\">no units</span></td>" in html  # regression undefined
    assert "<td>80.0% <span class=\"ci\"></span></td>" in html  # preservation: no interval given
    files = site_files(SiteInputs(inputs.folder, {**inputs.snapshots, "pairings": [held]}), None)
    assert files["api/v1/margin/pairings"] == site_files(inputs, None)["api/v1/margin/pairings"]
    assert "Renamed guard" not in files["api/v1/margin/pairings"] and "Renamed guard" in files["pairings.html"]


def test_a_transformation_gives_its_interval_and_definedness_from_the_studys_evidence():
    bare = PairTransformation(name="t", evasion=1, regression=0, preservation=0.5, qualifies=True)
    assert (bare.interval("evasion"), bare.is_defined("evasion")) == (None, True)  # older files say nothing
    told = PairTransformation.model_validate({**bare.document(), "ci": {"evasion": [0.9, 1.0], "regression": None},
                                              "defined": {"preservation": False, "evasion": True}})
    assert [told.interval(r) for r in ("evasion", "regression", "preservation")] == [[0.9, 1.0], None, None]
    assert [told.is_defined(r) for r in ("evasion", "regression", "preservation")] == [True, True, False]
