"""Where the adaptive search puts its edits: one edit of a family inside each word (the
knock-out), every position of a family (dense), and the families in the order it tries
them. Pure functions of a text and the transform registry."""

from __future__ import annotations

from collections.abc import Sequence

from margin.cost import edit_distance
from margin.search.edits import ADAPTIVE, Op, apply_ops, conflicts, parse_script
from margin.transforms.base import EditTransform
from margin.transforms.registry import get_transform, registry
from margin.transforms.words import word_spans
from margin.types import Flip


def edit_families(text: str) -> list[str]:
    """The registry's edit transforms in the order take-out tries them (see `ranked_families`)."""
    return [name for name, _ in ranked_families(text)]


def ranked_families(text: str) -> list[tuple[str, int]]:
    """(name, cost) of the registry's edit transforms, where cost is the distance of the
    dearest single in-word edit on `text` (some, like upside-down, rewrite a whole word):
    cheapest first, then invisible before visible, NFKC-stable first, then by name. Read
    from the registry at call time, so every transform added to the library takes part."""
    ranked = []
    for name, transform in registry().items():
        if not isinstance(transform, EditTransform):
            continue
        anchors = knockout_ops(text, name)
        if not anchors:
            continue
        cost = max(edit_distance(text, apply_ops(text, [anchor], 0)) for anchor in anchors)
        ranked.append((cost, transform.visible, transform.nfkc_stable is not True, name))
    return [(name, cost) for cost, *_, name in sorted(ranked)]


def apart(ops: Sequence[Op]) -> bool:
    """No two replacements touch or abut, so a group's placements cannot join into one word."""
    cells: set[int] = set()
    for op in ops:
        mine = set(range(op.start - 1, max(op.end, op.start + 1) + 1))
        if mine & cells:
            return False
        cells |= mine
    return True


def knockout_ops(text: str, name: str, words: Sequence[int] | None = None, *, at_start: bool = False) -> list[Op]:
    """One edit of transform `name` inside each word (in `words` order, default all): at the
    eligible position nearest a third of the way in, which lies inside most words' stems
    (`at_start`: nearest the word's first letter, where a subword tokenizer's split begins)."""
    transform = get_transform(name)
    assert isinstance(transform, EditTransform)
    eligible = transform.eligible(text)
    spans = word_spans(text)
    ops = []
    for index in words if words is not None else range(len(spans)):
        start, end = spans[index]
        inside = [p for p in eligible if transform.in_word(text, p, start, end)]
        if inside:
            target = start if at_start else start + (end - start + 1) // 3
            ops.append(Op.edit(name, min(inside, key=lambda p: (abs(p - target), p))))
    return ops


def dense_ops(text: str, name: str, words: Sequence[int]) -> list[Op]:
    """Every eligible in-word position of transform `name` that does not overlap an earlier
    one, words in `words` order, positions nearest the knock-out anchor first."""
    transform = get_transform(name)
    assert isinstance(transform, EditTransform)
    eligible = transform.eligible(text)
    spans = word_spans(text)
    ops: list[Op] = []
    for index in words:
        start, end = spans[index]
        target = start + (end - start + 1) // 3
        inside = sorted((p for p in eligible if transform.in_word(text, p, start, end)),
                        key=lambda p: (abs(p - target), p))
        for p in inside:
            op = Op.edit(name, p)
            if not conflicts([*ops, op], text):
                ops.append(op)
    return ops


def incumbent_ops(text: str, flip: Flip, seed: int) -> tuple[Op, ...]:
    """The incumbent as an edit script this search can prune, when it is one (an edit
    transform's flip, or an adaptive one, made with this seed); else ()."""
    if flip.seed != seed:
        return ()
    if flip.transform == ADAPTIVE:
        return parse_script(flip.strength)
    transform = get_transform(flip.transform)
    chosen = getattr(transform, "chosen", None)
    if not isinstance(transform, EditTransform) or chosen is None:
        return ()
    ops = tuple(Op.edit(flip.transform, p) for p in chosen(text, flip.strength, seed))
    try:
        same = bool(ops) and apply_ops(text, ops, seed) == flip.text
    except ValueError:
        same = False
    return ops if same else ()

