"""Where an edit transform's edits go: the strength grammar (`Strength`), and `Edits`, one
transform's work on one text with one seed — its eligible positions, the orders strengths
take prefixes of, and what each edit writes. The base module's doc says why prefixes nest
and costs never fall as strength rises."""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from margin.cost import edit_distance
from margin.transforms.draws import Draws, seeded_order
from margin.transforms.salience import salient_order
from margin.transforms.words import word_spans


class Editor(Protocol):
    """What `Edits` asks of an edit transform (`margin.transforms.base.EditTransform`)."""

    additive: bool

    def eligible(self, text: str) -> list[int]: ...
    def spans(self, text: str, positions: Sequence[int]) -> list[tuple[int, int]]: ...
    def span(self, text: str, position: int) -> tuple[int, int]: ...
    def replacements(self, text: str, positions: Sequence[int], seed: int) -> list[str]: ...
    def in_word(self, text: str, position: int, start: int, end: int) -> bool: ...


SALIENT = "salient:"


def position_draws(seed: int, position: int) -> Draws:
    """The draws for an edit at `position`: the same whatever the strength."""
    return Draws(seed, position)


@dataclass(frozen=True, slots=True)
class Strength:
    """A parsed strength: exactly one of count, percent, word is set (or variant for wrappers)."""

    count: int | None = None
    percent: float | None = None
    word: int | None = None
    salient: bool = False

    @classmethod
    def parse(cls, strength: str) -> Strength:
        return _parse_strength(strength)

    @classmethod
    def _parse(cls, strength: str) -> Strength:
        s = strength.strip()
        if s.startswith(SALIENT):
            inner = cls._parse(s[len(SALIENT):])
            if inner.word is None and not inner.salient:
                return replace(inner, salient=True)
        elif s.startswith("@") and s[1:].isdigit():
            return cls(word=int(s[1:]))
        elif s.endswith("%"):
            try:
                pct = float(s[:-1])
            except ValueError:
                pct = -1.0
            if 0 < pct <= 100:
                return cls(percent=pct)
        elif s.isdigit() and int(s) > 0:
            return cls(count=int(s))
        raise ValueError(f"unknown strength {strength!r}: use k, p% (0<p<=100), salient:k, salient:p% or @i")


@functools.lru_cache(maxsize=1024)
def _parse_strength(strength: str) -> Strength:
    return Strength._parse(strength)


class Edits:
    """One edit transform's work on one text with one seed: where edits can go, the orders
    strengths take prefixes of, and what each edit writes (a replacement reads only the
    original, so it is the same at every strength). Built on demand, once."""

    __slots__ = ("transform", "text", "seed", "positions", "spans", "wide", "made", "_orders", "_per_word", "_span_of",
                 "_ladders")

    def __init__(self, transform: Editor, text: str, seed: int) -> None:
        self.transform = transform
        self.text = text
        self.seed = seed
        self.positions = tuple(transform.eligible(text))
        self.spans = tuple(transform.spans(text, self.positions))
        self.wide = any(hi - lo > 1 for lo, hi in self.spans)  # some edit replaces more than one code point
        self.made: dict[int, str] = {}  # replacements by position
        self._orders: dict[bool, tuple[tuple[int, ...], int]] = {}
        self._per_word: tuple[tuple[int, ...], ...] | None = None
        self._span_of: dict[int, tuple[int, int]] | None = None
        # Per order: the text's cells with its first `done` edits made, so a later call for
        # more edits (a candidate builder asks for one strength at a time) goes on from there.
        self._ladders: dict[bool, tuple[list[str], int]] = {}

    def order(self, salient: bool) -> tuple[tuple[int, ...], int]:
        found = self._orders.get(salient)
        if found is None:
            ordered = _placed_order(self.text, self.seed, salient, self.positions, self.spans)
            kept = ordered if self.transform.additive else self._never_cheaper(ordered)
            found = self._orders[salient] = (kept, len(ordered))
        return found

    def per_word(self) -> tuple[tuple[int, ...], ...]:
        """For each word of the text, the eligible positions whose edit lands inside it."""
        if self._per_word is None:
            words = word_spans(self.text)
            starts = [start for start, _ in words]
            per_word: list[list[int]] = [[] for _ in words]
            for p, (lo, _) in zip(self.positions, self.spans, strict=True):
                # Only the word starting last at or before the edit can hold it.
                i = bisect.bisect_right(starts, lo) - 1
                if i >= 0 and self.transform.in_word(self.text, p, *words[i]):
                    per_word[i].append(p)
            self._per_word = tuple(tuple(ps) for ps in per_word)
        return self._per_word

    def chosen(self, strength: str) -> list[int]:
        parsed = Strength.parse(strength)
        if parsed.word is not None:
            per_word = self.per_word()
            inside = per_word[parsed.word] if parsed.word < len(per_word) else ()
            return [inside[_word_pick(self.seed, len(inside))]] if inside else []
        order, usable = self.order(parsed.salient)
        if parsed.count is not None:
            return list(order[: parsed.count])
        assert parsed.percent is not None
        return list(order[: math.ceil(parsed.percent * usable / 100)])

    def count(self, strength: str) -> int:
        """How many edits `strength` makes, `len(chosen(strength))`, without ordering the
        positions where no span is wider than a code point (then every position is usable)."""
        parsed = Strength.parse(strength)
        if parsed.word is not None or not self.transform.additive or self.wide:
            return len(self.chosen(strength))
        usable = len(self.positions)
        if parsed.count is not None:
            return min(parsed.count, usable)
        assert parsed.percent is not None
        return min(math.ceil(parsed.percent * usable / 100), usable)

    def span_of(self) -> dict[int, tuple[int, int]]:
        if self._span_of is None:
            self._span_of = dict(zip(self.positions, self.spans, strict=True))
        return self._span_of

    def replacement(self, position: int) -> str:
        made = self.made.get(position)
        if made is None:
            self.make([position])
            made = self.made[position]
        return made

    def make(self, positions: Iterable[int]) -> None:
        """Make the replacements at `positions` not made yet, in one call to the transform."""
        missing = [p for p in positions if p not in self.made]
        if missing:
            self.made.update(zip(missing, self.transform.replacements(self.text, missing, self.seed), strict=True))

    def render(self, positions: Iterable[int]) -> str:
        text = self.text
        pieces: list[str] = []
        last = 0
        for position in sorted(positions):  # spans start at their position, never overlap
            lo, hi = self.transform.span(text, position)
            pieces.append(text[last:lo])
            pieces.append(self.replacement(position))
            last = hi
        pieces.append(text[last:])
        return "".join(pieces)

    def texts(self, strengths: Sequence[str]) -> list[str]:
        """`[render(chosen(s)) for s in strengths]`, each edit made once: count and share
        strengths take nested prefixes of one order, so one pass along it, editing a list of
        the text's code points, yields every text of the ladder as one join (and the next
        call goes on where this one stopped)."""
        text, made, span_of = self.text, self.made, self.span_of()
        out = [text] * len(strengths)  # a strength with no edit to make leaves the text
        singles: list[tuple[int, int]] = []  # (position, index in strengths)
        ladders: dict[bool, list[tuple[int, int]]] = {}  # salient -> (edits, index in strengths)
        for i, strength in enumerate(strengths):
            parsed = Strength.parse(strength)
            if parsed.word is not None:
                for p in self.chosen(strength):
                    singles.append((p, i))
                continue
            order, usable = self.order(parsed.salient)
            edits = parsed.count if parsed.count is not None else math.ceil(parsed.percent * usable / 100)  # type: ignore[operator]
            ladders.setdefault(parsed.salient, []).append((min(edits, len(order)), i))
        needed = [p for p, _ in singles]
        for salient, steps in ladders.items():
            steps.sort()
            cells, done = self._ladders.get(salient, (None, 0))
            if cells is None or steps[0][0] < done:
                self._ladders[salient] = cells, done = [*text, ""], 0  # the last cell takes an insertion at the end
            needed.extend(self.order(salient)[0][done:steps[-1][0]])
        if needed:
            self.make(needed)
        for p, i in singles:  # one edit: splice it in
            lo, hi = span_of[p]
            out[i] = text[:lo] + made[p] + text[hi:]
        for salient, steps in ladders.items():
            order = self.order(salient)[0]
            cells, done = self._ladders[salient]
            for count, i in steps:
                for p in order[done:count]:
                    self._edit(cells, p, span_of[p])
                done = max(done, count)
                out[i] = "".join(cells)
            self._ladders[salient] = (cells, done)
        return out

    def _edit(self, cells: list[str], position: int, span: tuple[int, int]) -> None:
        """Make the edit at `position` in `cells` (the text's code points and one cell after
        them). Spans never overlap, so each edit owns the cells it writes."""
        lo, hi = span
        if lo == hi:
            cells[lo] = self.made[position] + cells[lo]
        else:
            cells[lo] = self.made[position]
            for cell in range(lo + 1, hi):
                cells[cell] = ""

    def _never_cheaper(self, order: tuple[int, ...]) -> tuple[int, ...]:
        """`order` less every position whose edit would lower the distance to the original
        reached by the positions kept before it (so every prefix costs no less than the
        one before)."""
        self.make(order)
        cells = [*self.text, ""]
        kept: list[int] = []
        reached = 0
        span_of = self.span_of()
        for p in order:
            lo, hi = span_of[p]
            before = cells[lo:max(hi, lo + 1)]
            self._edit(cells, p, (lo, hi))
            distance = edit_distance(self.text, "".join(cells))
            if distance >= reached:
                kept.append(p)
                reached = distance
            else:
                cells[lo:max(hi, lo + 1)] = before  # undo it
        return tuple(kept)


# An Edits is a pure function of its arguments; the cache spares a prompt's many strengths
# of one transform (and callers of `apply` one strength at a time) from recomputing it.
@functools.lru_cache(maxsize=4096)
def edits_of(transform: Editor, text: str, seed: int) -> Edits:
    return Edits(transform, text, seed)


@functools.lru_cache(maxsize=4096)
def _placed_order(text: str, seed: int, salient: bool, positions: tuple[int, ...],
                  spans: tuple[tuple[int, int], ...]) -> tuple[int, ...]:
    """`positions` in seeded or salient order, less any whose span overlaps one kept before
    it (so prefixes stay nested). It depends on where edits go, not on what they write, so
    transforms with the same positions and spans (the zero-width insertions, the styled
    alphabets) share it."""
    span_of = dict(zip(positions, spans, strict=True))
    if salient:
        ordered = salient_order(text, positions, span_of.__getitem__, seed)
    else:
        ordered = seeded_order(positions, seed)
    if all(hi - lo <= 1 for lo, hi in spans):
        return tuple(ordered)  # one code point or none each, at distinct positions: no overlap
    taken: set[int] = set()
    kept: list[int] = []
    for p in ordered:
        lo, hi = span_of[p]
        touched = range(lo, max(hi, lo + 1))
        if any(i in taken for i in touched):
            continue
        taken.update(touched)
        kept.append(p)
    return tuple(kept)


@functools.lru_cache(maxsize=4096)
def _word_pick(seed: int, n: int) -> int:
    """Which of a word's n eligible positions an ``@i`` strength edits."""
    return Draws(seed, "word").randrange(n)


