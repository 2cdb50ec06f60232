"""`adaptive` search: spend guard calls to find where the guard reacts, then edit there.

A PromptSearch like `cheapest`, so the in-process driver and the Ray engine host it
unchanged: it asks for candidates, never calls a guard, and is deterministic given its
verdicts (the same seed gives the same flips, whatever the batch size).

For a prompt the guard gets right, it looks for the cheapest edit set that makes the guard
wrong, in the guard's answer's direction:

- take words out (unsafe prompts): every edit family of the registry, cheapest first, makes
  its one edit inside each word (the knock-out, itself a candidate flip); once one family
  flips the prompt, the search grows the set of knocked-out words from the top of the
  ranking (1, 2, 4, ... words, then bisection), so it finds the shortest flipping prefix,
  fixes its last word and repeats on the words before it: group testing that finds d words
  among n in about d log n calls. Words are ranked by a guard-blind prior (probe-word forms,
  then content words), re-ranked by the guard's own reaction when it reports p_unsafe;
- put words in (safe prompts): turn harmless words into probe words, or insert them, at the
  fewest edits (approximate matching), trying all placements of one cost level together
  and bisecting the group that flips;
- with scores (guards that report p_unsafe, either direction): first knock out each content
  word alone, all in one round, and rank the words by how far each knock-out moves the
  guard toward the wrong answer; try other edit kinds (one edit of each of four visible
  kinds, those that change a subword tokenizer's split first) in the top words, each word
  keeping its strongest edit; then knock out every word that helped and keep the fewest
  that flip. Put-in candidates carry the two strongest knock-outs, and the guard-blind
  take-out runs only when they found no flip;
- with scores, when no flip costs one edit yet: sweep the prompt's one-edit variants
  (`single_edits`) best first by the guard's measured sensitivity (`sweep`), 24 calls before
  put-in and take-out and the calls left after them (not with `one_edit="none"`), then stack
  the strongest measured edit of each word (`stacks`); each result is tagged whether its cost
  is certified minimal among one-edit flips; `one_edit="all"` then asks every one-edit
  variant left, with its own budget beside max_calls, so every cost is certified;
- flip, then prune: drop edits one at a time while the candidate still flips;
- seeded with the standard suite's flip for the prompt (the incumbent), it asks for that
  candidate first and prunes its edits, so its cost never exceeds the suite's.

Every candidate is `transform="adaptive"` with an edit script as strength (`edits.py`), so
its text rebuilds from (transform, strength, seed). Costs come from the run's CostModel.
Its flip costs are upper bounds on each prompt's true flip cost: never rank them with
standard-suite margins (`margin.reports.protocols`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from margin.cost import CostModel
from margin.runrecord import DEFAULT_MAX_CALLS, DEFAULT_SEED
from margin.search.approx import word_placements
from margin.search.candidates import Candidates
from margin.search.edits import Op, conflicts, rebuild_text
from margin.search.knockouts import apart, dense_ops, incumbent_ops, knockout_ops, ranked_families
from margin.search.planned import Asks, OutOfCalls, PlannedSearch
from margin.search.probes import PROBE_WORDS, STOPWORDS, salience_order
from margin.transforms.base import EditTransform
from margin.transforms.registry import get_transform
from margin.transforms.words import word_spans
from margin.types import Candidate, Flip, Prompt

#: single-edit reactions asked per round when ranking by the guard's reaction: the ranking
#: stops at the first single edit that flips, so asking fewer at a time saves calls.
SINGLES_PER_ROUND = 4
#: after a put-in level's first flip, how many more of its groups are tried for a cheaper one
#: (measured on minilm's XSTest safe prompts: the later groups rarely beat it; docs/adaptive.md).
MORE_GROUPS_AFTER_A_FLIP = 3
#: with scores: in how many of the words whose knock-out helped most (by the prompt's label)
#: other edit kinds are tried, and how many kinds per word, in one round (measured on
#: minilm's XSTest prompts against DeepWordBug: docs/adaptive.md).
TOP_WORDS = {"unsafe": 2, "safe": 1}
VARIANTS_PER_WORD = 4
#: the kinds tried first, each changing where a subword tokenizer splits the word: a letter put
#: before it, a space inside it, a letter deleted, a letter replaced (then the registry's order).
#: On unsafe prompts they edit the word's first letter (docs/adaptive.md).
VARIANT_KINDS = ("tokenbreak-prefix", "space-in-word", "char-deletion", "char-substitution")
#: with scores, on a safe prompt whose top word's strongest single edit brings p_unsafe to at
#: least CLOSE, the same kinds are tried at that word's first letter too, for a one-edit flip.
CLOSE = 0.4
#: how many of the strongest helpful knock-outs ride along in every put-in candidate.
BOOST = 2
#: with scores: how many guard calls the sweep over one-edit variants may spend before the
#: other steps (by the prompt's label), and how many variants it asks a round (docs/adaptive.md).
SWEEP_CALLS = {"unsafe": 24, "safe": 24}
SWEEP_ROUND = 4
#: with scores, when no one-edit flip has been found by the end, spend the calls left on the
#: sweep (a one-edit flip it finds is a cheaper flip; one that asks them all certifies the cost).
SWEEP_TAIL = True
SWEEP_SEEDED = False  # whether the knock-out round's moves seed the sweep's word sensitivities
#: the calls-left sweep gives up once this many variants are asked and none came within this
#: closeness of flipping (p_unsafe 0.1 for a safe prompt; measured on minilm, docs/adaptive.md).
SWEEP_GIVE_UP: tuple[int, float] | None = (40, 0.1)
#: `--one-edit`: "guided", the sweep above within max_calls (a cost may stay an upper bound among
#: one-edit flips); "all", then every one-edit variant left is asked (its own budget beside
#: max_calls: one call per variant), unless a one-edit flip is in hand, so each cost is certified;
#: "none", no sweep: the fewest calls, and only one-edit flips are certified.
ONE_EDIT_MODES = ("guided", "all", "none")
STACK_CALLS = 40  # `--one-edit all`: calls for the stacks after certifying (~10, then 8 a `_grow` round)


class AdaptiveSearch(PlannedSearch):
    """The plan above; see the module's docstring."""

    def __init__(self, prompt: Prompt, original: Candidate, candidates: Sequence[Candidate] | Candidates,
                 budget: float, *,
                 cost_model: CostModel, seed: int = DEFAULT_SEED, max_calls: int = DEFAULT_MAX_CALLS,
                 incumbent: Flip | None = None, families: Sequence[str] | None = None,
                 prior: bool = True, one_edit: str = "guided") -> None:
        if one_edit not in ONE_EDIT_MODES:
            raise ValueError(f"one_edit must be one of {ONE_EDIT_MODES}, not {one_edit!r}")
        args = dict(prompt=prompt, original=original, candidates=candidates, budget=budget,
                    cost_model=cost_model, seed=seed, max_calls=max_calls, incumbent=incumbent,
                    families=families, prior=prior, one_edit=one_edit)
        self.one_edit = one_edit
        super().__init__(prompt, original, candidates, budget, cost_model=cost_model, seed=seed,
                         max_calls=max_calls, args=args)
        ranked = ranked_families(prompt.text)
        self.family_cost = dict(ranked)
        self.families = list(families) if families is not None else [name for name, _ in ranked]
        self.spans = word_spans(prompt.text)  # (start, end) of each word, which every step reads
        self.order = salience_order(prompt.text, probes=prior)  # word indices, likeliest first
        self.incumbent = self._incumbent_candidate(incumbent)
        self.helpful: list[Op] = []  # single edits that move a scoring guard toward a flip, best first
        self._start()

    # -- the plan ---------------------------------------------------------------------------

    def _plan(self) -> Asks:
        with contextlib.suppress(OutOfCalls):  # the calls are spent: what was found stands
            yield from self._search()
        clean = self.by_text.get(self.text)
        if self.one_edit == "all" and clean is not None and not clean.is_wrong_for(self.prompt.label):
            yield from self._ask_every_one_edit()
            if not self._at_floor():  # every single edit's move is known now: stack the strongest
                self.call_limit = len(self.issued) + STACK_CALLS
                with contextlib.suppress(OutOfCalls):
                    yield from self._stack(grow=True)

    def _search(self) -> Asks:
        """The search within max_calls (it raises OutOfCalls when they are spent)."""
        if not (yield from self._original_is_right()):
            return
        clean = self.by_text[self.text]
        if self.incumbent is not None:
            yield from self._ask([self.incumbent])
            yield from self._prune_incumbent()
        if self._at_floor():
            return
        scored = clean.p_unsafe is not None
        if scored:
            yield from self._react_and_combine()
            if self._at_floor():
                return
            if self.one_edit != "none":
                yield from self._sweep_one_edits(SWEEP_CALLS[self.prompt.label], SWEEP_ROUND, SWEEP_SEEDED)
                if self._at_floor():
                    return
            yield from self._stack()
        if self.prompt.label == "safe":
            yield from self._put_in()
        # With scores, the knock-outs above already chose words by the guard's reaction:
        # the guard-blind take-out runs only when they found no flip.
        if not self._at_floor() and (self.best() is None or (self.prompt.label == "unsafe" and not scored)):
            yield from self._take_out()
        if scored and SWEEP_TAIL and self.one_edit != "none" and not self._at_floor():  # calls left: one-edit variants
            yield from self._sweep_one_edits(self.max_calls, SWEEP_ROUND, SWEEP_SEEDED, SWEEP_GIVE_UP)
            if not self._at_floor():
                yield from self._stack()  # the sweep measured more words

    def _react_and_combine(self) -> Asks:
        """For guards that report p_unsafe: knock out each word alone (one round), rank the
        words by how far each knock-out moves the guard toward the wrong answer, then knock
        out the words that help, best first, and keep the fewest that flip."""
        words = [w for w in self.order if not self._stopword(w)] or list(self.order)
        for name in [n for n in self.families if self.family_cost.get(n, 1) <= 1][:3]:
            atoms = knockout_ops(self.text, name, words)
            if not atoms:
                continue
            verdicts = yield from self._ask([self._candidate([a]) for a in atoms])
            if self._at_floor():
                return
            base = self._toward_flip(self.by_text.get(self.text))
            gains = {a: self._toward_flip(v) - base for a, v in zip(atoms, verdicts, strict=True)}
            self.gains.update(gains)
            if max(abs(g) for g in gains.values()) < 1e-6:
                continue  # the guard ignores this family: try the next
            helpful = sorted((a for a in atoms if gains[a] > 0), key=lambda a: (-gains[a], atoms.index(a)))
            helpful = yield from self._variants(helpful, gains, base)
            if self.prompt.label == "safe" and helpful and base + gains[helpful[0]] >= CLOSE:
                helpful = yield from self._closer(helpful, gains, base, name)
            self.gains.update(gains)  # with the other kinds' moves, for `_stack`
            if self._at_floor():
                return
            self.helpful = helpful
            if len(helpful) > 1 and (yield from self._test(helpful)):
                kept = yield from self._minimise([], helpful, self._ceiling())
                if kept is not None:
                    yield from self._prune(kept)
            return

    def _variants(self, helpful: list[Op], gains: dict[Op, float], base: float) -> Asks:
        """Other one-code-point edits inside the words whose knock-out helped most (one round);
        each word keeps its strongest edit. Returns the helpful edits re-ranked."""
        tried: list[tuple[Op, Op]] = []  # (the word's knock-out, a variant inside the same word)
        for atom in helpful[: TOP_WORDS[self.prompt.label]]:
            for name in self._variant_kinds(atom.name):
                ops = knockout_ops(self.text, name, [self._word_of(atom)], at_start=self.prompt.label == "unsafe")
                tried.extend((atom, op) for op in ops)
        if not tried:
            return helpful
        verdicts = yield from self._ask([self._candidate([op]) for _, op in tried])
        best = {a: a for a in helpful}
        for (atom, op), verdict in zip(tried, verdicts, strict=True):
            gains[op] = self._toward_flip(verdict) - base
            if gains[op] > gains[best[atom]]:
                best[atom] = op
        kept = [best[a] for a in helpful]
        return [kept[i] for i in sorted(range(len(kept)), key=lambda i: (-gains[kept[i]], i))]

    def _closer(self, helpful: list[Op], gains: dict[Op, float], base: float, knockout: str) -> Asks:
        """The top word is one strong edit away from flipping: try the variants' kinds at its
        first letter too (one round); it keeps its strongest edit. Returns the helpful edits,
        the top one maybe replaced."""
        top, index = helpful[0], self._word_of(helpful[0])
        ops = list(dict.fromkeys(op for name in self._variant_kinds(knockout)
                                 for op in knockout_ops(self.text, name, [index], at_start=True) if op not in gains))
        verdicts = yield from self._ask([self._candidate([op]) for op in ops])
        best = top
        for op, verdict in zip(ops, verdicts, strict=True):
            gains[op] = self._toward_flip(verdict) - base
            if gains[op] > gains[best]:
                best = op
        return [best, *helpful[1:]]

    def _variant_kinds(self, knockout: str) -> list[str]:
        """The kinds tried inside a knock-out's word: VARIANT_KINDS first, then the other
        visible one-code-point kinds in take-out's order, not the knock-out's own."""
        visible = [n for n in self.families if self.family_cost.get(n, 1) <= 1 and get_transform(n).visible]
        kinds = [n for n in VARIANT_KINDS if n in visible] + [n for n in visible if n not in VARIANT_KINDS]
        return [n for n in kinds if n != knockout][:VARIANTS_PER_WORD]

    def _word_of(self, op: Op) -> int:
        return next(i for i, (start, end) in enumerate(self.spans) if start <= op.start < end)

    def _stopword(self, index: int) -> bool:
        start, end = self.spans[index]
        word = self.text[start:end]
        return word.casefold() in STOPWORDS or len(word) < 3

    def _prune_incumbent(self) -> Asks:
        """Flip-then-prune from the standard suite's flip, when it is a set of edits."""
        ops = self._incumbent_ops
        if len(ops) < 2 or not self._flips(self.incumbent.text if self.incumbent else ""):
            return
        rank = {w: r for r, w in enumerate(self.order)}
        def word_of(op: Op) -> int:
            for index, (start, end) in enumerate(self.spans):
                if start <= op.start < end:
                    return rank[index]
            return len(self.spans)

        ordered = sorted(ops, key=lambda op: (word_of(op), op.start))
        # The incumbent's own text stands for the full set, so minimise without re-asking it.
        assert self.incumbent is not None
        self.built[tuple(sorted(ordered))] = self.incumbent
        kept = yield from self._minimise([], ordered)
        yield from self._prune(kept)

    def _take_out(self) -> Asks:
        # Families whose every edit is one code point come first, knock-out then dense; a
        # family that rewrites whole words is tried only when none of those flips.
        tiers = ([n for n in self.families if self.family_cost.get(n, 1) <= 1],
                 [n for n in self.families if self.family_cost.get(n, 1) > 1])
        for tier in tiers:
            for name in tier:
                atoms = knockout_ops(self.text, name, self.order)
                if atoms and (yield from self._test(atoms)):
                    yield from self._shrink(atoms, name)
                    return
            for name in tier:  # one edit per word was not enough: every position
                atoms = dense_ops(self.text, name, self.order)
                if atoms and (yield from self._test(atoms)):
                    kept = yield from self._shrink(atoms, name)
                    if kept is not None:
                        yield from self._merge(kept, name)
                    return

    def _shrink(self, atoms: list[Op], name: str) -> Asks:
        """From a flipping set of edits to a locally minimal one (None when nothing cheaper
        than the best flip so far is in it); with scores, try again in the order of the
        guard's reaction to each edit alone."""
        kept = yield from self._minimise([], atoms, self._ceiling())
        if kept is None:
            return None
        kept = yield from self._prune(kept)
        clean = self.by_text.get(self.text)
        if len(kept) > 1 and clean is not None and clean.p_unsafe is not None and not self._at_floor():
            reaction = yield from self._react(atoms)
            ceiling = self._ceiling()
            if reaction and self._pair_floor(atoms) < ceiling - 1e-9:
                again = yield from self._minimise([], reaction, ceiling)
                if again is not None:
                    again = yield from self._prune(again)
                    if self._candidate(again).cost < self._candidate(kept).cost:
                        kept = again
        return kept

    def _react(self, atoms: list[Op]) -> Asks:
        """The guard's reaction to each edit alone, asked a few at a time in ranked order;
        the edits, closest to flipping first. Empty when a single edit flips at a cost no
        other single or pair could beat: then there is nothing left to rank."""
        cost = {a: self._candidate([a]).cost for a in atoms}
        asked: list[Op] = []
        for first in range(0, len(atoms), SINGLES_PER_ROUND):
            chunk = atoms[first : first + SINGLES_PER_ROUND]
            yield from self._ask([self._candidate([a]) for a in chunk])
            asked.extend(chunk)
            rest = atoms[first + SINGLES_PER_ROUND :]
            bound = min([*(cost[a] for a in rest), self._pair_floor(atoms)])
            if any(self._flips(self._candidate([a]).text) for a in asked) and self._ceiling() <= bound + 1e-9:
                return []
        return sorted(atoms, key=lambda a: (-self._toward_flip(self.by_text.get(self._candidate([a]).text)),
                                            atoms.index(a)))

    def _merge(self, kept: list[Op], name: str) -> Asks:
        """Where several edits landed in one word, try one edit of the family in between."""
        transform = get_transform(name)
        assert isinstance(transform, EditTransform)
        eligible = transform.eligible(self.text)
        for start, end in self.spans:
            inside = [op for op in kept if start <= op.start < end]
            if len(inside) < 2:
                continue
            lo, hi = min(op.start for op in inside), max(op.start for op in inside)
            middle = (lo + hi) / 2
            for p in sorted((p for p in eligible if lo <= p <= hi), key=lambda p: (abs(p - middle), p)):
                trial = [*(op for op in kept if op not in inside), Op.edit(name, p)]
                if (yield from self._test(trial)):
                    kept = trial
                    break
        return kept

    def _put_in(self) -> Asks:
        """Turn harmless words into probe words (or insert them), cheapest level first; all
        placements of a level are tried in as few candidates as do not overlap."""
        best = self.best()
        ceiling = min(self.budget, best.cost if best else float("inf"))
        levels: dict[int, list[Op]] = {}
        seen = {self.text}
        for placement in word_placements(self.text, PROBE_WORDS):
            op = Op.replace(placement.start, placement.end, placement.replacement)
            candidate = self._candidate([op])
            if candidate.text in seen or candidate.cost >= ceiling:
                continue
            seen.add(candidate.text)
            levels.setdefault(placement.ops, []).append(op)
        for level in sorted(levels):
            groups: list[list[Op]] = []
            for op in levels[level]:
                for group in groups:
                    if not apart([*group, op]):
                        continue
                    group.append(op)
                    break
                else:
                    groups.append([op])
            since_flip: int | None = None  # groups tried since the level's first flip
            for group in groups:
                if since_flip is not None:
                    if since_flip >= MORE_GROUPS_AFTER_A_FLIP:
                        break
                    since_flip += 1
                boost = [a for a in self.helpful if not conflicts([*group, a], self.text)][:BOOST]
                if (yield from self._test(boost + group)):
                    since_flip = since_flip or 0
                    # With knock-outs riding along, a flip takes several of the items, spread
                    # out: bisection finds them in fewer calls than galloping from the front.
                    kept = yield from self._minimise([], boost + group, self._ceiling(), gallop=not self.helpful)
                    if kept is not None:
                        kept = yield from self._prune(kept)
                        if len(kept) == 1:
                            return
            if since_flip is not None:
                return

    # -- the incumbent -----------------------------------------------------------------------

    def _incumbent_candidate(self, flip: Flip | None) -> Candidate | None:
        self._incumbent_ops: tuple[Op, ...] = ()
        if flip is None:
            return None
        text = rebuild_text(self.text, flip.transform, flip.strength, flip.seed)
        if text != flip.text:
            raise ValueError(f"prompt {self.prompt.id!r}: the incumbent flip does not rebuild from "
                             f"{flip.transform} {flip.strength} seed {flip.seed}")
        candidate = Candidate(self.prompt.id, flip.transform, flip.strength, flip.seed, text,
                              self.cost_model.cost(self.text, text))
        self._incumbent_ops = incumbent_ops(self.text, flip, self.seed)
        return candidate

