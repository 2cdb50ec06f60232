"""The registry gathers the transforms each module lists beside its code, and misses none."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest

from margin.transforms.base import Transform, WrapperTransform
from margin.transforms.registry import gather, registry, transform_modules


def transform_classes(module) -> list[type[Transform]]:
    """The concrete, named transform classes a module defines (not bases such as StyledLetters)."""
    return [cls for _, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and issubclass(cls, Transform)
            and not inspect.isabstract(cls) and isinstance(getattr(cls, "name", None), str)]


@pytest.mark.parametrize("module", transform_modules(), ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_transform_class_is_in_its_modules_list(module):
    listed = {type(t) for t in getattr(module, "TRANSFORMS", ())}
    missing = [cls.__name__ for cls in transform_classes(module) if cls not in listed]
    assert not missing, f"{module.__name__}: add {', '.join(missing)} to its TRANSFORMS"


def test_the_check_sees_a_class_left_out():
    class Forgotten(WrapperTransform):
        name = "forgotten"

        def __init__(self) -> None:
            super().__init__("forgotten", "frame", {"v": "{prompt}"}, "a test")

    module = SimpleNamespace(__name__=__name__, Forgotten=Forgotten, TRANSFORMS=())
    Forgotten.__module__ = __name__
    assert transform_classes(module) == [Forgotten]


def test_every_listed_transform_is_in_the_registry():
    listed = [t for module in transform_modules() for t in getattr(module, "TRANSFORMS", ())]
    assert sorted(t.name for t in listed) == sorted(registry())
    assert all(registry()[t.name] is t for t in listed)


def wrapper(name: str) -> WrapperTransform:
    return WrapperTransform(name, "frame", {"v": "{prompt}"}, "a test")


def test_edits_first_then_modules_by_order_then_each_modules_own_order():
    from margin.transforms.homoglyphs import Homoglyph
    from margin.transforms.noise import CaseFlip, Leetspeak

    late = SimpleNamespace(__name__="late", ORDER=20, TRANSFORMS=(wrapper("w1"), Leetspeak(), CaseFlip()))
    early = SimpleNamespace(__name__="early", ORDER=10, TRANSFORMS=(wrapper("w2"), Homoglyph()))
    helper = SimpleNamespace(__name__="helper")  # lists nothing
    assert list(gather([late, helper, early])) == ["homoglyph", "leetspeak", "case-flip", "w2", "w1"]


def test_a_name_listed_twice_or_a_list_without_order_is_refused():
    twice = [SimpleNamespace(__name__="a", ORDER=1, TRANSFORMS=(wrapper("same"),)),
             SimpleNamespace(__name__="b", ORDER=2, TRANSFORMS=(wrapper("same"),))]
    with pytest.raises(RuntimeError, match="two transforms are named 'same'"):
        gather(twice)
    with pytest.raises(RuntimeError, match="unordered lists TRANSFORMS but has no int ORDER"):
        gather([SimpleNamespace(__name__="unordered", TRANSFORMS=(wrapper("x"),))])
