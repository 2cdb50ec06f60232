"""The one table of adapter families (`margin.guards.adapters.families.FAMILIES`): complete,
read by the presets, and every family's parser held to the verdict contract, so a new
family is checked here without editing this file."""

from __future__ import annotations

import dataclasses
import inspect
import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from margin.backends.generation import Generation
from margin.guards.adapters.base import Adapter
from margin.guards.adapters.families import FAMILIES, INTERFACES, adapter_modules, gather
from margin.guards.adapters.moderation import Moderation
from margin.guards.adapters.prompted import Prompted
from margin.guards.adapters.sequence_classifier import SequenceClassifier
from margin.guards.adapters.wildguard import WildGuard
from margin.guards.presets import GENERATIVE, PRESET_LIST, PROMPTED, gather_presets
from margin.types import Exchange, Turn

LABELS = ("safe", "unsafe", "invalid")
#: Options a family cannot be built without, where no preset gives them (the prompted kind's policy).
REQUIRED_OPTIONS = {"prompted": {"policy": "Answer unsafe if the message asks for harm, else safe."}}
RESPONSE = Exchange((Turn("user", "q"), Turn("assistant", "a")), "response")
#: A policy every policy-taking family's form accepts (Llama Guard's: `S<n>: <description>` lines).
POLICY = "S1: No spam."
GARBAGE = ("", "  \n\t ", "\x00\x01\x02", "<<< ??? >>>", "lorem ipsum dolor sit amet")


def defined_adapters(module: types.ModuleType) -> list[type]:
    """The concrete adapter classes `module` defines (not imports)."""
    return [cls for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and issubclass(cls, INTERFACES)
            and cls not in INTERFACES and not inspect.isabstract(cls)]


@pytest.mark.parametrize("module", adapter_modules(), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_adapter_class_is_listed_in_its_module(module):
    listed = getattr(module, "ADAPTERS", ())
    missing = [cls.__name__ for cls in defined_adapters(module) if cls not in listed]
    assert not missing, f"{module.__name__}: add {missing} to its ADAPTERS"


def test_the_table_holds_every_family_by_its_own_name():
    assert all(family == cls.family for family, cls in FAMILIES.items())
    assert {"llama-guard", "prompted", "sequence-classifier", "openai-moderation"} <= set(FAMILIES)
    moderation = {f for f, cls in FAMILIES.items() if issubclass(cls, Moderation)}
    assert set(GENERATIVE) | moderation | {"sequence-classifier"} == set(FAMILIES)
    assert not set(GENERATIVE) & moderation


def test_gather_refuses_two_of_a_family_and_a_class_that_is_no_adapter():
    one = types.ModuleType("one")
    one.ADAPTERS = (WildGuard,)
    two = types.ModuleType("two")
    two.ADAPTERS = (WildGuard,)
    with pytest.raises(RuntimeError, match="two adapters are family 'wildguard'"):
        gather([one, two])
    odd = types.ModuleType("odd")
    odd.ADAPTERS = (int,)
    with pytest.raises(RuntimeError, match="odd lists int, which is not an adapter"):
        gather([odd])
    assert gather([one, types.ModuleType("none")]) == {"wildguard": WildGuard}


def test_every_preset_names_a_family_and_every_family_has_a_preset():
    presets = [*PRESET_LIST, PROMPTED]
    assert {p.family for p in presets} == set(FAMILIES)
    assert gather_presets(adapter_modules()) == PRESET_LIST


def test_a_module_lists_presets_of_its_own_families_only_and_a_name_once():
    wildguard = types.SimpleNamespace(__name__="wildguard", ADAPTERS=(WildGuard,),
                                      PRESETS=(dataclasses.replace(PROMPTED, name="w", family="wildguard"),))
    assert [p.name for p in gather_presets([wildguard])] == ["w"]
    stray = types.SimpleNamespace(__name__="stray", ADAPTERS=(WildGuard,), PRESETS=(PROMPTED,))
    with pytest.raises(RuntimeError, match="stray lists preset 'prompted' of family 'prompted', which its ADAPTERS"):
        gather_presets([stray])
    with pytest.raises(RuntimeError, match="two presets are named 'w'"):
        gather_presets([wildguard, wildguard])
    assert not gather_presets([types.SimpleNamespace(__name__="none")])  # a module without presets adds none


def instances() -> list[tuple[str, object]]:
    """Every preset's adapter (and the prompted kind's), as the presets build them; a preset
    whose family is not in the table fails the test above instead."""
    return [(p.name, FAMILIES[p.family](p.variant, {**REQUIRED_OPTIONS.get(p.family, {}), **p.options}))
            for p in (*PRESET_LIST, PROMPTED) if p.family in FAMILIES]


INSTANCES = instances()


def verdicts(adapter: object, text: str) -> list:
    """The adapter's verdicts when the model (or API) answers `text`, one per case it takes."""
    if isinstance(adapter, Adapter):
        shapes = adapter.shapes_for(adapter.variant)
        responses = [RESPONSE, *([RESPONSE._replace(policy=POLICY)] if shapes.policy else [])]
        cases = ["x", *(responses if "response" in shapes.targets else [])]
        return [adapter.verdict(case, [Generation(text=text)] * len(adapter.requests(case))) for case in cases]
    if isinstance(adapter, Moderation):
        return [adapter.parse(text), adapter.parse({"results": text})]
    assert isinstance(adapter, SequenceClassifier), f"{type(adapter).__name__}: add its interface here"
    return [adapter.verdict([float(len(text)), 0.0], 0)]


@pytest.mark.parametrize(("name", "adapter"), INSTANCES, ids=[name for name, _ in INSTANCES])
@given(text=st.text(max_size=80))
def test_no_family_parser_raises_and_labels_stay_in_the_contract(name, adapter, text):
    assert all(v.label in LABELS for v in verdicts(adapter, text))


@pytest.mark.parametrize(("name", "adapter"), INSTANCES, ids=[name for name, _ in INSTANCES])
def test_every_family_reads_garbage_as_invalid(name, adapter):
    if isinstance(adapter, SequenceClassifier):
        assert adapter.verdict([float("nan"), 0.0], 0).label == "invalid"  # logits, never text
        return
    for text in GARBAGE:
        assert {v.label for v in verdicts(adapter, text)} == {"invalid"}, repr(text)


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=2, max_size=4), st.data())
def test_a_classifier_verdict_never_raises(logits, data):
    index = data.draw(st.integers(0, len(logits) - 1))
    assert SequenceClassifier("protectai").verdict(logits, index).label in LABELS


def test_the_prompted_kind_needs_its_policy():
    # REQUIRED_OPTIONS is only what construction refuses without.
    from margin.errors import InputError

    with pytest.raises(InputError):
        Prompted("", {})
