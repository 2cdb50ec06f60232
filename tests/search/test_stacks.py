"""Stacks of single edits (`margin.search.stacks`, `PlannedSearch._stack`): when no one edit
flips a prompt but the strongest edits of two words together do, adaptive search finds that
two-edit flip from the moves it has measured, as DeepWordBug and TextBugger do by ranking
words and editing them one after another (issue 23)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import pytest

from margin.cost import CostModel
from margin.guards.base import Guard
from margin.search import planned
from margin.search.adaptive import STACK_CALLS, AdaptiveSearch
from margin.search.candidates import original_candidate
from margin.search.edits import Op, apply_ops
from margin.search.single_edits import certified_edits
from margin.search.stacks import additions, ranked_per_word, stacks, strongest_per_word, word_of
from margin.serving.session import drive
from margin.types import GuardInfo, Prompt, Verdict

TEXT = "how do i kill a python process on a linux server"
TARGETS = ("python", "process", "linux")


def test_word_of_puts_an_edit_in_the_word_it_touches():
    spans = [(0, 3), (4, 6), (7, 12)]  # "how do thing"
    assert [word_of(spans, p) for p in (0, 2, 3, 4, 6, 7, 12, 13)] == [0, 0, 0, 1, 1, 2, 2, 2]


def test_strongest_per_word_keeps_each_words_best_positive_move_strongest_first():
    text = "alpha beta gamma"
    gains = {Op.replace(0, 1, ""): 0.1, Op.replace(2, 3, ""): 0.3,  # alpha: 0.3 wins
             Op.replace(6, 7, ""): 0.5,  # beta
             Op.replace(11, 12, ""): -0.2, Op.replace(12, 13, ""): math.nan}  # gamma: no move toward a flip
    assert strongest_per_word(gains, text) == [Op.replace(6, 7, ""), Op.replace(2, 3, "")]
    tied = {Op.replace(8, 9, ""): 0.2, Op.replace(1, 2, ""): 0.2}
    assert strongest_per_word(tied, text) == [Op.replace(1, 2, ""), Op.replace(8, 9, "")]  # ties: earlier first


def test_stacks_are_the_prefixes_of_two_words_or_more_and_never_overlap():
    text = "one two three four"
    a, b, c, d = Op.replace(0, 1, ""), Op.replace(4, 5, ""), Op.replace(8, 9, ""), Op.replace(14, 15, "")
    gains = {a: 0.4, b: 0.3, c: 0.2, d: 0.1}
    assert stacks(gains, text) == [[a, b], [a, b, c], [a, b, c, d]]
    assert stacks(gains, text, words=2) == [[a, b]]
    assert stacks({a: 0.4}, text) == []  # one word: nothing to stack
    swap = Op.replace(2, 4, " e")  # "one two" -> "on etwo": touches "one" and the gap before "two"
    assert stacks({swap: 0.5, b: 0.3, c: 0.2}, text)[0] == [swap, b]


class TwoWordsGuard(Guard):
    """A scoring guard that flips TEXT (safe) only when exactly two of TARGETS each lose one
    letter: no one edit flips it, and neither does breaking all three (so knocking every word
    out at once, as take-out does, never flips). Nothing else moves its score."""

    @property
    def info(self) -> GuardInfo:
        return GuardInfo(id="two-words", family="test", checkpoint="two-words", revision="1", backend="python")

    def p(self, text: str) -> float:
        tokens = set(re.findall(r"[a-z]+", text.lower()))
        broken = sum(any(t[:i] + t[i + 1:] in tokens for i in range(len(t))) for t in TARGETS)
        return {0: 0.1, 1: 0.3, 2: 0.7}.get(broken, 0.3)

    def classify(self, texts: Sequence[str]) -> list[Verdict | None]:
        return [Verdict("unsafe" if (p := self.p(t)) >= 0.5 else "safe", p_unsafe=p, raw=str(p)) for t in texts]


def run(one_edit: str, max_calls: int = 100, guard: Guard | None = None):
    prompt = Prompt("p", TEXT, "safe", "t")
    model = CostModel.for_corpus([TEXT])
    search = AdaptiveSearch(prompt, original_candidate(prompt, 0), [], 100.0, cost_model=model, seed=0,
                            max_calls=max_calls, one_edit=one_edit)
    (result,) = drive([search], guard or TwoWordsGuard(), batch_size=64, on_call=lambda _: None)
    return result, search


@pytest.mark.parametrize("one_edit", ["guided", "all"])
def test_two_words_each_one_letter_short_are_found_at_two_edits(one_edit):
    assert not any(TwoWordsGuard().p(apply_ops(TEXT, [e.op], 0)) >= 0.5 for e in certified_edits(TEXT, 0))
    result, search = run(one_edit)
    assert result.flip is not None
    assert result.flip_cost == pytest.approx(2 * search.unit)  # two deletions: nothing cheaper flips
    assert TwoWordsGuard().p(result.flip.text) >= 0.5


def test_without_stacks_the_same_search_finds_no_flip(monkeypatch):
    """What the stacks add: the search's other steps never flip this guard."""
    monkeypatch.setattr(planned, "stacks", lambda gains, text: [])
    result, _ = run("guided")
    assert result.flip is None and result.capped


def test_certified_stacks_spend_at_most_their_own_budget():
    result, _ = run("all", max_calls=30)
    assert result.flip is not None
    assert result.guard_calls <= 30 + len(certified_edits(TEXT, 0)) + STACK_CALLS


class CostlySwapGuard(TwoWordsGuard):
    """Flips TEXT (safe) at p_unsafe 0.5: "process" one letter short ("procss") adds 0.3,
    "python" one letter short ("pytho") 0.3 or two letters swapped ("pyhton", two units of
    cost) 0.35. The swap moves the guard further but costs twice as much."""

    def p(self, text: str) -> float:
        tokens = set(re.findall(r"[a-z]+", text.lower()))
        python = 0.35 if "pyhton" in tokens else 0.3 if "pytho" in tokens else 0.0
        return 0.1 + 0.3 * ("procss" in tokens) + python


def test_a_stack_weighs_each_edit_by_what_it_costs():
    result, search = run("all", guard=CostlySwapGuard())
    read = set(re.findall(r"[a-z]+", result.flip.text.lower())) if result.flip is not None else set()
    # "python" one unit short as the guard reads it (a letter deleted, or one no longer a-z)
    assert {"procss", "pytho"} <= read and "pyhton" not in read
    assert result.flip_cost == pytest.approx(2 * search.unit)  # not the swap's three units


class ClashingGuard(TwoWordsGuard):
    """Edits that do not add up: each of TARGETS one letter short moves p_unsafe up (python
    most), python and linux together flip TEXT, but python and process together, or all
    three, do not: a stack of the strongest edits by their single moves never flips."""

    def p(self, text: str) -> float:
        tokens = set(re.findall(r"[a-z]+", text.lower()))
        broken = frozenset(t for t in TARGETS if any(t[:i] + t[i + 1:] in tokens for i in range(len(t))))
        return {frozenset(): 0.1, frozenset({"python"}): 0.35, frozenset({"process"}): 0.3,
                frozenset({"linux"}): 0.25, frozenset({"python", "linux"}): 0.8}.get(broken, 0.4)


def test_certified_grows_a_stack_by_the_guards_answers_where_single_moves_mislead(monkeypatch):
    guided, _ = run("guided", guard=ClashingGuard())
    assert guided.flip is None  # the stacks of the strongest single moves: python + process (+ linux)
    result, search = run("all", guard=ClashingGuard())
    assert result.flip is not None and result.flip_cost == pytest.approx(2 * search.unit)
    assert ClashingGuard().p(result.flip.text) >= 0.5
    monkeypatch.setattr(planned, "GROW_LAYERS", 0)
    again, _ = run("all", guard=ClashingGuard())
    assert again.flip is None  # what growing adds



def test_additions_are_the_top_edits_of_each_untouched_word():
    text = "one two three four"
    a, b, b2, c = Op.replace(0, 1, ""), Op.replace(4, 5, ""), Op.replace(5, 6, ""), Op.replace(8, 9, "")
    gains = {a: 0.4, b: 0.3, b2: 0.35, c: 0.2, Op.replace(14, 15, ""): 0.1}
    assert additions([a], ranked_per_word(gains, text), text, width=3) == [b2, b, c]  # two, strongest first, then three's
    assert additions([a], ranked_per_word(gains, text), text, per_word=1) == [b2, c, Op.replace(14, 15, "")]
    assert additions([b], ranked_per_word(gains, text), text) == [a, c, Op.replace(14, 15, "")]  # "two" is taken
