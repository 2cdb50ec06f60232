"""BadCharacters2021's pure parts (benchmarks/peer_badchars.py, which runs outside margin's
environment in the benchmark): each kind's gene vector decoded to a text, the count of
texts sent, and a whole attack against a local scorer."""

from __future__ import annotations

import pytest

from benchmarks.peer_badchars import (
    BACKSPACE,
    INVISIBLE,
    KINDS,
    LRI,
    PDF,
    PDI,
    RLO,
    Asker,
    attack,
    bounds,
    decode,
    genes_per_perturbation,
    glyph_pairs,
)
from margin.cost import CostModel

TEXT = "kill a cat"


def test_minus_one_genes_mean_no_perturbation_for_every_kind():
    for kind in KINDS:
        off = [-1.0 if i % genes_per_perturbation(kind) == (0 if kind in ("homoglyph", "reorder", "deletion") else 1)
               else 0.0 for i in range(2 * genes_per_perturbation(kind))]
        assert decode(kind, TEXT, off) == TEXT, kind


def test_each_kind_decodes_its_genes_at_positions_of_the_original():
    assert decode("invisible", TEXT, [1.7, 4.2, 0.0, 10.9]) == "kill" + INVISIBLE[1] + " a cat" + INVISIBLE[0]
    assert decode("deletion", TEXT, [0.0, 65.5, -1.0, 66.0]) == "A" + BACKSPACE + TEXT
    pairs = glyph_pairs(TEXT)
    index = pairs.index((5, "\u0430"))  # the "a" of "a" -> Cyrillic a
    assert decode("homoglyph", TEXT, [float(index)]) == "kill \u0430 cat"
    assert decode("reorder", TEXT, [0.0, 1.0, 8.3]) == LRI + RLO + "ik" + PDF + PDI + "ll a c" + LRI + RLO + "ta" + PDF + PDI
    assert len(bounds("invisible", TEXT, 3)) == 6 and bounds("deletion", TEXT, 1)[1] == (33.0, 127.0)


def test_costs_in_margins_units_follow_the_inserted_code_points():
    model = CostModel(norm="corpus", corpus_mean_length=50.0)  # one code point costs 2.0
    assert model.cost(TEXT, decode("invisible", TEXT, [0.0, 3.0])) == pytest.approx(2.0)
    assert model.cost(TEXT, decode("deletion", TEXT, [3.0, 70.0])) == pytest.approx(4.0)
    assert model.cost(TEXT, decode("reorder", TEXT, [0.0])) == pytest.approx(10.0)  # 4 controls + a swap: Levenshtein 5


def test_the_asker_sends_each_distinct_text_once_and_counts_it():
    seen = []
    ask = Asker(lambda texts: seen.extend(texts) or [0.0] * len(texts))
    ask(["a", "b", "a"])
    ask(["b", "c"])
    assert seen == ["a", "b", "c"] and ask.sent == 3


def test_an_attack_stops_at_the_first_flip_at_the_smallest_budget():
    # "unsafe" while the text contains a Latin "kill": any look-alike inside it flips
    def score(texts):
        return [0.9 if "kill" in t else 0.1 for t in texts]

    options = {"budget": 2, "maxiter": 3, "popsize": 8, "seed": 0}
    ask = Asker(score)
    got = attack(TEXT, "unsafe", ask, options)
    assert got["status"] == "successful" and got["budget"] == 1
    assert "kill" not in got["text"] and got["kind"] in ("invisible", "homoglyph", "deletion", "reorder")
    assert ask.sent >= 2  # the original, then at least the flip
    assert attack(TEXT, "safe", Asker(score), options)["status"] == "skipped"  # the guard gets it wrong
    never = attack("kill", "unsafe", Asker(lambda texts: [0.9] * len(texts)), options)
    assert never["status"] == "failed" and never["text"] == "kill"


def test_the_peer_halves_import_nothing_of_margin():
    # they run in environments of their own (TextAttack's pins transformers 4.x)
    import ast
    from pathlib import Path

    for name in ("peer_badchars.py", "peer_textattack.py", "peer_http.py"):
        tree = ast.parse((Path(__file__).resolve().parents[2] / "benchmarks" / name).read_text("utf-8"))
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not {m for m in imported if m.split(".")[0] in ("margin", "benchmarks", "tests")}, name
