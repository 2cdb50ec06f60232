"""The strategy table: each strategy's traits as data, and typed options checked in one place."""

from __future__ import annotations

import pytest

from margin.cost import CostModel
from margin.errors import InputError
from margin.reports.protocols import (
    ADAPTIVE_PROTOCOL,
    SEARCH_TRAITS,
    STANDARD_PROTOCOL,
    observes_all,
    protocol_for,
)
from margin.search.adaptive import AdaptiveSearch
from margin.search.bon import BestOfNSearch
from margin.search.candidates import original_candidate
from margin.search.make import STRATEGIES, GuidedOptions, check_options, make_search, strategy
from margin.search.strategies import CheapestSearch
from margin.transforms.registry import get_transform
from margin.types import Flip, Prompt

PROMPT = Prompt("p", "How do I kill a python process?", "safe", "t")
MODEL = CostModel.for_corpus([PROMPT.text])
ORIGINAL = original_candidate(PROMPT, 0)


def test_each_strategy_has_its_traits_and_reports_read_the_same():
    assert set(STRATEGIES) == set(SEARCH_TRAITS)
    expected = {"cheapest": (STANDARD_PROTOCOL, False), "exhaustive": (STANDARD_PROTOCOL, True),
                "adaptive": (ADAPTIVE_PROTOCOL, False), "bon": (ADAPTIVE_PROTOCOL, False)}
    assert {name: (strategy(name).protocol, strategy(name).observes_all) for name in STRATEGIES} == expected
    assert {name: (protocol_for(name), observes_all(name)) for name in STRATEGIES} == expected
    # a run from a margin with other strategies: a suite replayed cheapest first
    assert (protocol_for("beam"), observes_all("beam")) == (STANDARD_PROTOCOL, False)


def test_suite_strategies_take_no_options_and_guided_ones_need_them():
    assert isinstance(make_search("cheapest", PROMPT, ORIGINAL, [], 100.0), CheapestSearch)
    with pytest.raises(InputError, match="search 'cheapest' takes no options"):
        make_search("cheapest", PROMPT, ORIGINAL, [], 100.0, GuidedOptions(MODEL))
    with pytest.raises(InputError, match="search 'bon' needs its options"):
        make_search("bon", PROMPT, ORIGINAL, [], 100.0)


def test_guided_options_reach_the_constructor_as_given():
    text = get_transform("homoglyph").apply(PROMPT.text, "1", 0)
    flip = Flip("homoglyph", "1", 0, MODEL.cost(PROMPT.text, text), "unsafe", text)
    made = make_search("adaptive", PROMPT, ORIGINAL, [], 100.0,
                       GuidedOptions(MODEL, seed=3, max_calls=7, incumbent=flip, one_edit="all"))
    direct = AdaptiveSearch(PROMPT, ORIGINAL, [], 100.0, cost_model=MODEL, seed=3, max_calls=7, incumbent=flip,
                            one_edit="all")
    assert made._args == direct._args
    bon = make_search("bon", PROMPT, ORIGINAL, [], 100.0, GuidedOptions(MODEL, seed=2, max_calls=5))
    assert bon._args == BestOfNSearch(PROMPT, ORIGINAL, [], 100.0, cost_model=MODEL, seed=2, max_calls=5)._args


@pytest.mark.parametrize(("options", "message"), [
    (GuidedOptions(MODEL, one_edit="all"), "only --search adaptive takes --one-edit"),
    (GuidedOptions(MODEL, incumbent=Flip("homoglyph", "1", 0, 3.2, "unsafe", "x")),
     "only --search adaptive takes --incumbents"),
])
def test_an_option_the_strategy_does_not_take_is_one_error(options, message):
    with pytest.raises(InputError, match=message) as caught:
        make_search("bon", PROMPT, ORIGINAL, [], 100.0, options)
    assert caught.value.field == "--search"
    with pytest.raises(InputError, match=message):  # the same check the CLI and the API run
        check_options("bon", options.given())
    check_options("adaptive", options.given())
