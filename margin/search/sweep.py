"""The order in which adaptive search asks a prompt's one-edit variants (`single_edits`).

Best first by what the guard has shown so far: each variant's priority is its word's
sensitivity (the largest move toward a flip any variant inside that word has made, or a
knock-out reported by `measured`), plus the largest move seen within SPREAD code points of
it (where in the word the guard reacts), plus its kind's observed success (the mean move of
that kind's variants asked so far). Every word not yet measured gets one probe first
(stopwords and one-letter words included), so no word is left at the back unseen. Pure
bookkeeping: it never asks the guard; `PlannedSearch._sweep_one_edits` asks and reports
each move back. The weights were compared offline on recorded verdicts
(`benchmarks/single_edit.py --simulate`; docs/adaptive.md).
"""

from __future__ import annotations

from collections import defaultdict

from margin.search.single_edits import OneEdit, one_edits
from margin.search.stacks import word_of
from margin.transforms.words import word_spans

#: the kind each word's probe uses: a deletion at a third of the way in, the cheapest way
#: to change a word that keeps no letter a tokenizer could still read as before. (A
#: neighbour-key substitution did better on the sample it was tried on and worse on the
#: held-out prompts: docs/adaptive.md.)
PROBE_KIND = "deletion"
SPREAD = 1  # code points either side whose moves count toward a variant's spot
SPOT_WEIGHT = 1.0  # the spot's weight beside the word's sensitivity


class OneEditSweep:
    """The one-edit variants of `text`, handed out best first."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.spans = word_spans(text) or [(0, len(text))]
        self.pending: list[OneEdit] = one_edits(text)
        self.total = len(self.pending)
        self.word = {e: self._word_of(e.op.start) for e in self.pending}  # every variant it holds, asked or not
        self.sensitivity: dict[int, float] = {}  # word -> largest move toward a flip seen in it
        self.kind_moves: dict[str, list[float]] = defaultdict(list)
        self.spot: dict[int, float] = {}  # code point -> largest move of an edit asked there
        self.best_move = float("-inf")  # the largest move of any variant asked

    def _word_of(self, position: int) -> int:
        return word_of(self.spans, position)

    @property
    def asked(self) -> int:
        return self.total - len(self.pending)

    @property
    def complete(self) -> bool:
        """Every one-edit variant has been asked."""
        return not self.pending

    def extend(self, edits: list[OneEdit]) -> None:
        """Hold these variants too (`--one-edit all`: the edit transforms' single edits),
        after those it has; one it holds already is skipped."""
        fresh = [e for e in dict.fromkeys(edits) if e not in self.word]
        self.pending.extend(fresh)
        self.total += len(fresh)
        self.word.update((e, self._word_of(e.op.start)) for e in fresh)

    def measured(self, position: int, move: float) -> None:
        """An edit outside the sweep (a knock-out) at `position` moved the guard by `move`."""
        word = self._word_of(position)
        self.sensitivity[word] = max(self.sensitivity.get(word, float("-inf")), move)

    def probes(self) -> list[OneEdit]:
        """One variant in each word not yet measured: the probe kind nearest a third of the way in."""
        out = []
        for index, (start, end) in enumerate(self.spans):
            if index in self.sensitivity:
                continue
            target = start + (end - start) // 3
            mine = [e for e in self.pending if self.word[e] == index and e.op.start < end]
            kind = [e for e in mine if e.kind == PROBE_KIND] or mine
            if kind:
                out.append(min(kind, key=lambda e: (abs(e.op.start - target), e.op.start)))
        return out

    def record(self, edit: OneEdit, move: float) -> None:
        """`edit` was asked and moved the guard `move` toward a flip (-inf: no score)."""
        if edit in self.word:
            self.pending.remove(edit)
        if move == float("-inf"):
            return
        word = self.word.get(edit, self._word_of(edit.op.start))
        self.sensitivity[word] = max(self.sensitivity.get(word, float("-inf")), move)
        self.kind_moves[edit.kind].append(move)
        self.best_move = max(self.best_move, move)
        self.spot[edit.op.start] = max(self.spot.get(edit.op.start, float("-inf")), move)

    def next(self, count: int) -> list[OneEdit]:
        """The `count` pending variants of highest priority (ties: text order)."""
        floor = min(self.sensitivity.values(), default=0.0)
        kinds = {k: sum(v) / len(v) for k, v in self.kind_moves.items() if v}
        unknown = min(kinds.values(), default=0.0)

        def priority(item: tuple[int, OneEdit]) -> tuple[float, int]:
            index, edit = item
            word = self.sensitivity.get(self.word[edit], floor)
            near = [self.spot[p] for p in range(edit.op.start - SPREAD, edit.op.start + SPREAD + 1) if p in self.spot]
            spot = max(near) if near else word
            return (-(word + SPOT_WEIGHT * spot + kinds.get(edit.kind, unknown)), index)

        ranked = sorted(enumerate(self.pending), key=priority)
        return [edit for _, edit in ranked[:count]]

