"""Every one-edit variant of a prompt, and the true minimum cost among those that flip it.

One edit is a typo-sized change at one place: delete a character, replace a letter by a
neighbouring QWERTY key, insert a letter, swap two adjacent different characters, or replace a
letter by one homoglyph (its first NFKC-stable TR39 lookalike). The set is finite and small
(about 30 edits per character, most of them insertions), so a brute force that asks the guard
about all of them gives the exact minimum among one-edit flips: the yardstick adaptive search
is held to (docs/adaptive.md), and what its sweep asks (`adaptive.py`).

What `--one-edit all` certifies is a larger set (`certified_edits`): those typo-sized edits
and one edit of every edit transform of the registry (a superset of every suite's) at every
position it can edit, made as that transform makes it there for the run's seed: a space
inside a word (`space-in-word`), a zero-width character, a diacritic, and so on. run.json
names the set (`one_edit_set`: `KINDS` and `edit_transforms`).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from margin.cost import CostModel
from margin.search.edits import Op, apply_ops
from margin.transforms.base import EditTransform
from margin.transforms.homoglyphs import nfkc_stable_homoglyphs
from margin.transforms.noise import qwerty_neighbours, same_case
from margin.transforms.registry import registry
from margin.types import Verdict

#: the kinds, in the order enumerated (which decides which kind names a text two kinds make)
KINDS = ("deletion", "substitution", "homoglyph", "swap", "insertion")
INSERTED = string.ascii_lowercase  # what an insertion puts in


@dataclass(frozen=True, slots=True)
class OneEdit:
    kind: str
    op: Op  # a replacement of original code points, as adaptive's edit scripts write it


def one_edits(text: str, positions: Sequence[int] | None = None) -> list[OneEdit]:
    """Every one-edit variant of `text` (at `positions`, default all: an insertion at p goes
    before code point p, and p == len(text) appends), one per distinct text, never the
    original itself; by position, then kind in KINDS order."""
    seen = {text}
    out: list[OneEdit] = []
    for p in positions if positions is not None else range(len(text) + 1):
        for kind, op in _at(text, p):
            edited = apply_ops(text, [op], 0)
            if edited not in seen:
                seen.add(edited)
                out.append(OneEdit(kind, op))
    return out


def _at(text: str, p: int) -> list[tuple[str, Op]]:
    ops: list[tuple[str, Op]] = []
    char = text[p] if p < len(text) else ""
    if char:
        ops.append(("deletion", Op.replace(p, p + 1, "")))
        if char in string.ascii_letters:
            ops.extend(("substitution", Op.replace(p, p + 1, c))
                       for c in same_case(qwerty_neighbours()[char.lower()], char))
        glyphs = nfkc_stable_homoglyphs(char) if char.isalpha() else ()
        if glyphs:
            ops.append(("homoglyph", Op.replace(p, p + 1, glyphs[0])))
        if p + 1 < len(text) and text[p + 1] != char:
            ops.append(("swap", Op.replace(p, p + 2, text[p + 1] + char)))
    ops.extend(("insertion", Op.replace(p, p, c)) for c in INSERTED)
    return ops


def edit_transforms() -> tuple[str, ...]:
    """The registry's edit transforms, by name: those whose single edits `--one-edit all`
    certifies beside the typo-sized ones (read at call time, so every transform added to the
    library takes part)."""
    return tuple(sorted(name for name, t in registry().items() if isinstance(t, EditTransform)))


def transform_edits(text: str, seed: int) -> list[OneEdit]:
    """One edit of each edit transform at each position it can edit (its `eligible`), as it
    makes it there for `seed`, one per distinct text not the original; by transform name,
    then position. Their kind is the transform's name prefixed `edit:` (a typo kind and a
    transform may share a name: `homoglyph`)."""
    seen = {text}
    out: list[OneEdit] = []
    for name in edit_transforms():
        transform = registry()[name]
        assert isinstance(transform, EditTransform)
        for p in transform.eligible(text):
            op = Op.edit(name, p)
            edited = apply_ops(text, [op], seed)
            if edited not in seen:
                seen.add(edited)
                out.append(OneEdit(f"edit:{name}", op))
    return out


def certified_edits(text: str, seed: int) -> list[OneEdit]:
    """Every edit `--one-edit all` certifies on `text`: `one_edits`, then `transform_edits`
    whose texts none of those makes."""
    typos = one_edits(text)
    made = {text, *(apply_ops(text, [e.op], seed) for e in typos)}
    return typos + [e for e in transform_edits(text, seed) if apply_ops(text, [e.op], seed) not in made]


@dataclass(frozen=True, slots=True)
class SingleEditMinimum:
    cost: float | None  # the cheapest one-edit flip's cost; None when no one edit flips
    flips: tuple[OneEdit, ...]  # every one-edit flip at that cost
    asked: int  # one-edit variants judged (missing verdicts are not flips)
    verdicts: tuple[tuple[OneEdit, Verdict | None], ...] = ()  # every variant's verdict, in order


def single_edit_minimum(classify: Callable[[list[str]], Sequence[Verdict | None]], text: str, label: str,
                        cost_model: CostModel, batch: int = 256) -> SingleEditMinimum:
    """The true minimum cost among one-edit flips of `text` (labelled `label`): ask the guard
    (`classify`, a Guard's) about every one-edit variant, in batches."""
    edits = one_edits(text)
    texts = [apply_ops(text, [e.op], 0) for e in edits]
    flipping: list[tuple[float, OneEdit]] = []
    judged: list[tuple[OneEdit, Verdict | None]] = []
    for first in range(0, len(texts), batch):
        verdicts = classify(texts[first : first + batch])
        for edit, edited, verdict in zip(edits[first : first + batch], texts[first : first + batch], verdicts,
                                         strict=True):
            judged.append((edit, verdict))
            if verdict is not None and verdict.is_wrong_for(label):
                flipping.append((cost_model.cost(text, edited), edit))
    if not flipping:
        return SingleEditMinimum(None, (), len(edits), tuple(judged))
    low = min(cost for cost, _ in flipping)
    return SingleEditMinimum(low, tuple(e for cost, e in flipping if cost <= low + 1e-9), len(edits), tuple(judged))
