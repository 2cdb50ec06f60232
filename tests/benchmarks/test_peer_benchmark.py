"""The peer comparison's own parts: the HTTP bridge, the re-check of every peer flip, the
per-direction summary and the success-against-calls curves (TextAttack itself runs only in
the benchmark)."""

from __future__ import annotations

import json
import math
import urllib.request

import pytest

from benchmarks.peer import compare, curves, markdown, serve, summary
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
    assert by_id["u1"]["peer_cost"] == pytest.approx(2.0) and by_id["u2"]["peer_cost"] == pytest.approx(2.0)
    assert by_id["u3"]["peer_status"] == "successful" and not by_id["u3"]["peer_rechecked"]
    assert by_id["u3"]["peer_cost"] is None and by_id["s1"]["peer_cost"] is None

    unsafe = summary([r for r in rows if r["label"] == "unsafe"])
    assert unsafe["peer"]["broken"] == 2 and unsafe["peer"]["claimed_not_rechecked"] == 1
    assert unsafe["peer"]["guard_calls_per_success"] == pytest.approx((5 + 4 + 9) / 2)
    assert unsafe["margin"]["broken"] == 3 and unsafe["margin"]["calls_per_success"] == pytest.approx(13 / 3)
    assert unsafe["margin_dearer"] == ["u2"] and unsafe["tied"] == 1 and unsafe["margin_cheaper"] == 0
    assert unsafe["mean_cost_where_both"] == {"margin": pytest.approx(3.0), "peer": pytest.approx(2.0)}
    safe = summary([r for r in rows if r["label"] == "safe"])
    assert safe["peer"]["broken"] == 0 and safe["peer"]["guard_calls_per_success"] is None
    assert safe["margin_dearer"] == [] and safe["both_broken"] == 0

    table = markdown(rows, "pruthi").splitlines()
    assert table[0].startswith("| prompt | class | pruthi cost |") and len(table) == 2 + len(rows)
    assert table[3] == "| u2 | unsafe | 2.00 | 4 | 4.00 | 6 |"


def test_each_strategys_curve_counts_prompts_broken_within_n_calls_and_fits_its_first_tenth():
    # 20 unsafe prompts broken after 1..20 calls (ASR(n) = n/20 up to 20), 2 safe ones never
    rows = [("unsafe", n, True) for n in range(1, 21)] + [("safe", 7, False), ("safe", 20, False)]
    got = curves({"s": rows})["s"]
    unsafe = got["unsafe"]
    assert unsafe["budget"] == 20 and unsafe["fit_window"] == 2 and unsafe["measured_at_forecast"] == 1.0
    assert unsafe["asr_at"] == {"5": 0.25, "10": 0.5, "20": 1.0}
    # two points fit exactly: -log(1/20) = a and -log(2/20) = a 2^-b; forecast at 10 x 2 calls
    assert unsafe["fit"]["a"] == pytest.approx(-math.log(0.05))
    assert unsafe["fit"]["b"] == pytest.approx(math.log2(math.log(20) / math.log(10)))
    assert unsafe["fit"]["forecast_at"] == 20
    assert got["safe"]["measured_at_forecast"] == 0.0 and got["safe"]["fit"] is None


def test_an_attack_that_breaks_nothing_early_is_fitted_from_its_first_two_successes():
    # 40 calls of warm-up, then one prompt broken every 10 calls: 4 of 8 by 100 calls
    rows = [("unsafe", 40 + 10 * k, k < 4) for k in range(1, 9)]
    got = curves({"s": rows})["s"]["unsafe"]
    assert got["budget"] == 120 and got["fit_window"] == 60  # ASR 1/8 at 50, 2/8 at 60
    assert got["fit"]["forecast_at"] == 600 and got["measured_at_forecast"] == 0.375  # 3 of 8, at its end


def test_the_combined_table_has_a_column_per_peer():
    from benchmarks.peer import combined

    row = {"id": "u1", "label": "unsafe", "margin_cost": 2.0, "margin_calls": 4}
    table = combined({"pruthi": [{**row, "peer_cost": None, "peer_guard_calls": 9}],
                      "badchars": [{**row, "peer_cost": 4.0, "peer_guard_calls": 30}]}).splitlines()
    assert table[0] == "| prompt | class | margin adaptive | pruthi | badchars |"
    assert table[2] == "| u1 | unsafe | 2.00 (4) | — (9) | 4.00 (30) |"


@pytest.mark.slow  # two adaptive runs over 12 XSTest prompts, certified mode asking every variant
def test_one_edit_all_reaches_margins_side_and_certifies_every_cost(xstest_csv):
    """--one-edit reaches adaptive's RunConfig: with `all` every cost is tagged minimal among
    one-edit flips; by default (guided) the keyword guard's two-edit safe flips stay upper bounds."""
    import argparse

    from benchmarks.peer import margin_side
    from margin.reports.metrics import ONE_EDIT_TAG

    def tags(one_edit):
        args = argparse.Namespace(guard="keyword", dataset=str(xstest_csv), seed=0, limit=12, sample=None,
                                  one_edit=one_edit)
        _, outcome, _ = margin_side(args, "adaptive", None)
        return [dict(r.extra)[ONE_EDIT_TAG] for r in outcome.results
                if r.status == "scored" and r.clean_verdict == r.label]

    guided, certified = tags(None), tags("all")
    assert "upper-bound" in guided
    assert certified and set(certified) == {"minimal"}
