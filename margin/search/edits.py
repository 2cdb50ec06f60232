"""Edit scripts: the composite edits adaptive search makes, written into a candidate's strength.

An adaptive candidate is `Candidate(transform="adaptive", strength=SCRIPT, seed=SEED)`, where
SCRIPT names every edit against the original prompt, so the text can be rebuilt from those
three fields alone (resume, `margin score` replays, audits):

- ``NAME@P``: one edit of the registry's edit transform NAME at code point P of the original,
  exactly as that transform makes it at P for this seed (its `replacement` with `position_draws`);
- ``[S:E]=TEXT``: replace original code points S..E with TEXT (percent-encoded UTF-8);
  ``[S:S]=TEXT`` inserts, ``[S:E]=`` deletes.

Edits are joined by ``+`` in ascending position and never touch the same code point; they are
applied right to left, so every position refers to the original text.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import quote, unquote

from margin.transforms.base import EditTransform
from margin.transforms.placement import position_draws
from margin.transforms.registry import get_transform

ADAPTIVE = "adaptive"  # the `transform` field of every adaptive candidate


@dataclass(frozen=True, slots=True, order=True)
class Op:
    """One edit: a registry edit transform at `start` (name set), or a replacement of
    original code points [start, end) by `text` (name empty)."""

    start: int
    end: int = 0
    name: str = ""
    text: str = ""

    @classmethod
    def edit(cls, name: str, position: int) -> Op:
        return cls(start=position, end=position, name=name)

    @classmethod
    def replace(cls, start: int, end: int, text: str) -> Op:
        if not 0 <= start <= end:
            raise ValueError(f"bad replacement span [{start}:{end}]")
        return cls(start=start, end=end, text=text)

    def bounds(self, original: str) -> tuple[int, int]:
        """The original code points [lo, hi) this edit replaces (lo == hi: an insertion)."""
        if self.name:
            return _edit_transform(self.name).span(original, self.start)
        return self.start, self.end

    def touched(self, original: str) -> range:
        """Original code points this edit reads or rewrites; an insertion claims its position."""
        lo, hi = self.bounds(original)
        return range(lo, max(hi, lo + 1))

    def __str__(self) -> str:
        if self.name:
            return f"{self.name}@{self.start}"
        return f"[{self.start}:{self.end}]={quote(self.text, safe='')}"


def _edit_transform(name: str) -> EditTransform:
    transform = get_transform(name)
    if not isinstance(transform, EditTransform):
        raise ValueError(f"transform {name!r} is not an edit transform")
    return transform


def conflicts(ops: Iterable[Op], original: str) -> bool:
    """True when two edits touch the same code point of `original`."""
    seen: set[int] = set()
    for op in ops:
        cells = set(op.touched(original))
        if cells & seen:
            return True
        seen |= cells
    return False


def format_script(ops: Iterable[Op]) -> str:
    ordered = sorted(ops)
    if not ordered:
        raise ValueError("an edit script needs at least one edit")
    return "+".join(str(op) for op in ordered)


def parse_op(token: str) -> Op:
    if token.startswith("["):
        span, sep, encoded = token.partition("]=")
        start, colon, end = span[1:].partition(":")
        if not sep or not colon or not start.isdigit() or not end.isdigit():
            raise ValueError(f"bad replacement {token!r}: expected [START:END]=TEXT")
        return Op.replace(int(start), int(end), unquote(encoded, errors="strict"))
    name, at, position = token.rpartition("@")
    if not at or not name or not position.isdigit():
        raise ValueError(f"bad edit {token!r}: expected NAME@POSITION or [START:END]=TEXT")
    return Op.edit(name, int(position))


def parse_script(script: str) -> tuple[Op, ...]:
    ops = tuple(sorted(parse_op(token) for token in script.split("+")))
    if len(set(ops)) != len(ops):
        raise ValueError(f"edit script {script!r} repeats an edit")
    return ops


def apply_ops(original: str, ops: Sequence[Op], seed: int) -> str:
    """The text of an edit script; ValueError for overlapping or out-of-range edits."""
    ordered = sorted(ops)
    if conflicts(ordered, original):
        raise ValueError("edits overlap")
    text = original
    # Every replacement reads the original only, so edits apply right to left in any mix.
    for op in reversed(ordered):
        lo, hi = op.bounds(original)
        if op.name:
            transform = _edit_transform(op.name)
            if op.start not in set(transform.eligible(original)):
                raise ValueError(f"{op.name} cannot edit position {op.start}")
            piece = transform.replacement(original, op.start, position_draws(seed, op.start))
        else:
            if op.end > len(original):
                raise ValueError(f"replacement [{op.start}:{op.end}] is past the end of the text")
            piece = op.text
        text = text[:lo] + piece + text[hi:]
    return text


def rebuild_text(original: str, transform: str | None, strength: str | None, seed: int) -> str:
    """A candidate's text from its (transform, strength, seed): adaptive scripts, registry
    transforms, or the original (transform None)."""
    if transform is None:
        return original
    if strength is None:
        raise ValueError(f"transform {transform!r} needs a strength")
    if transform == ADAPTIVE:
        return apply_ops(original, parse_script(strength), seed)
    return get_transform(transform).apply(original, strength, seed)
