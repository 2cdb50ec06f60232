"""The site reads each snapshot into its model (`Snapshot`, `Pairings`) and renders from it;
only the endpoints are written from the file's own JSON, so they keep its bytes' order."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from margin.reports.pairings import Pairings
from margin.reports.snapshot_schema import Snapshot
from margin.site.build import build_site
from margin.site.inputs import load_publish_dir
from tests.support.site import make_publish_dir


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
