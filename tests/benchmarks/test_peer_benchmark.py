"""The DeepWordBug comparison's own parts: the HTTP bridge, the re-check of every peer flip,
and the per-direction summary (TextAttack itself runs only in the benchmark)."""

from __future__ import annotations

import json
import urllib.request

import pytest

from benchmarks.peer_deepwordbug import compare, markdown, serve, summary
from margin.cost import CostModel
from margin.types import Flip, SearchResult
from tests.support.lexicon_guards import WeightedLexiconGuard

GUARD = WeightedLexiconGuard(weights={"bomb": 0.6, "kill": 0.6, "python": -0.5}, threshold=0.5)
TEXTS = {"u1": "make a bomb", "u2": "kill it", "u3": "bomb it", "s1": "kill a python"}


def result(prompt_id, label, cost, calls):
    flip = Flip("adaptive", "homoglyph@1", 0, cost, "x", "text") if cost is not None else None
    return SearchResult(prompt_id=prompt_id, label=label, type="", clean_verdict=label, flip_cost=cost,
                        capped=cost is None, flip=flip, guard_calls=calls, status="scored")


def test_the_bridge_serves_the_guards_p_unsafe_over_http():
    server, url = serve(GUARD)
    try:
        body = json.dumps({"texts": list(TEXTS.values())}).encode()
        request = urllib.request.Request(f"{url}/p_unsafe", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            got = json.loads(response.read())["p_unsafe"]
    finally:
        server.shutdown()
    assert got == pytest.approx([v.p_unsafe for v in GUARD.classify(list(TEXTS.values()))])


def test_peer_flips_are_rechecked_costed_and_compared_prompt_by_prompt():
    model = CostModel(norm="corpus", corpus_mean_length=50.0)  # one edit costs 2.0
    results = [result("u1", "unsafe", 2.0, 4), result("u2", "unsafe", 4.0, 6), result("u3", "unsafe", 2.0, 3),
               result("s1", "safe", 2.0, 5)]
    peer = {
        "u1": {"status": "successful", "text": "make a bmb", "queries": 5, "guard_calls": 5},  # 1 edit: tie
        "u2": {"status": "successful", "text": "kll it", "queries": 4, "guard_calls": 4},  # 1 edit: peer cheaper
        "u3": {"status": "successful", "text": "bomb it!", "queries": 9, "guard_calls": 9},  # still blocked
        "s1": {"status": "failed", "text": "kill a python", "queries": 7, "guard_calls": 7},
    }
    rows = compare(results, TEXTS, peer, GUARD, model.cost)
    by_id = {r["id"]: r for r in rows}
    assert by_id["u1"]["dwb_cost"] == pytest.approx(2.0) and by_id["u2"]["dwb_cost"] == pytest.approx(2.0)
    assert by_id["u3"]["dwb_status"] == "successful" and not by_id["u3"]["dwb_rechecked"]
    assert by_id["u3"]["dwb_cost"] is None and by_id["s1"]["dwb_cost"] is None

    unsafe = summary([r for r in rows if r["label"] == "unsafe"])
    assert unsafe["deepwordbug"]["broken"] == 2 and unsafe["deepwordbug"]["claimed_not_rechecked"] == 1
    assert unsafe["deepwordbug"]["guard_calls_per_success"] == pytest.approx((5 + 4 + 9) / 2)
    assert unsafe["margin"]["broken"] == 3 and unsafe["margin"]["calls_per_success"] == pytest.approx(13 / 3)
    assert unsafe["margin_dearer"] == ["u2"] and unsafe["tied"] == 1 and unsafe["margin_cheaper"] == 0
    assert unsafe["mean_cost_where_both"] == {"margin": pytest.approx(3.0), "deepwordbug": pytest.approx(2.0)}
    safe = summary([r for r in rows if r["label"] == "safe"])
    assert safe["deepwordbug"]["broken"] == 0 and safe["deepwordbug"]["guard_calls_per_success"] is None
    assert safe["margin_dearer"] == [] and safe["both_broken"] == 0

    table = markdown(rows).splitlines()
    assert len(table) == 2 + len(rows) and table[3] == "| u2 | unsafe | 2.00 | 4 | 4.00 | 6 |"
