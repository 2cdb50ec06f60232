"""What a `python:` guard returns, as margin records it: a Verdict whose p_unsafe is not a
number in [0, 1] (NaN, inf, 1.5) or whose label margin does not know is `invalid` (a wrong
verdict, counted in coverage), so receipts and results hold no bare NaN that polars cannot read."""

from __future__ import annotations

import json
import math

import margin
from margin.guards.python_class import coerce
from margin.types import Verdict

GUARD = '''
from margin.guards.keyword import KeywordGuard
from margin.types import Verdict

ODD = [float("nan"), float("inf"), 1.5, 0.25]  # by the text's length: three unusable, one fine


class Odd:
    def __init__(self):
        self.inner = KeywordGuard()

    def classify(self, texts):
        return [Verdict(v.label, ODD[len(t) % 4]) for t, v in zip(texts, self.inner.classify(texts))]
'''


def test_a_p_unsafe_outside_0_1_or_an_unknown_label_is_invalid():
    for p in (math.nan, math.inf, -math.inf, 1.5, -0.1, "high"):
        verdict = coerce(Verdict("unsafe", p))  # type: ignore[arg-type]
        assert verdict.label == "invalid" and verdict.p_unsafe is None and "p_unsafe=" in verdict.raw
    assert coerce(Verdict("maybe", 0.5)).label == "invalid"  # type: ignore[arg-type]
    assert coerce(Verdict("unsafe", 1)) == Verdict("unsafe", 1.0) and coerce(Verdict("safe", 0.0)).p_unsafe == 0.0
    assert coerce(Verdict("safe")) == Verdict("safe")


def test_a_run_of_a_guard_giving_nan_writes_receipts_polars_reads(tmp_path):
    import polars as pl

    (tmp_path / "odd.py").write_text(GUARD)
    outcome = margin.run(f"python:{tmp_path / 'odd.py'}:Odd", dataset="sample", suite="quick", limit=8,
                         engine="local", cache=False, out=tmp_path / "run")
    frame = pl.read_ndjson(tmp_path / "run" / "receipts.jsonl", schema=margin.receipts_schema())
    calls = frame.filter(pl.col("kind") == "call")
    invalid = calls.filter(pl.col("verdict") == "invalid")
    assert invalid.height and invalid["p_unsafe"].null_count() == invalid.height
    assert {raw.split("p_unsafe=")[1].split(",")[0] for raw in invalid["raw"]} == {"nan", "inf", "1.5"}
    assert set(calls.filter(pl.col("verdict") != "invalid")["p_unsafe"]) == {0.25}
    for name in ("receipts.jsonl", "results.jsonl", "snapshot.json"):
        assert "NaN" not in (tmp_path / "run" / name).read_text() and "Infinity" not in (tmp_path / "run" / name).read_text()
    coverage = outcome.snapshot.document()["data"][0]["coverage"]
    wrong = sum(r.clean_verdict == "invalid" for r in outcome.results)
    assert wrong and sum(coverage["invalid"].values()) >= wrong
    assert json.loads((tmp_path / "run" / "snapshot.json").read_text())["data"][0]["coverage"] == coverage
