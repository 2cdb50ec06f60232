"""`bon` search: Best-of-N, the baseline of random character augmentations (Hughes et al. 2024,
"Best-of-N Jailbreaking"): sample augmented versions of the prompt and ask the guard until one
flips it or the call budget (`--max-calls`) is spent. It learns nothing from the answers.

Each sample applies, to the original, the paper's three text augmentations with its sigma of
0.4: scramble the inner letters of each word longer than three characters (probability
sigma^1/2), flip each character's case (sigma^1/2), and move each printable ASCII character
one code point up or down (sigma^3). Sample k of a prompt is a function of (seed, prompt,
k), written as a one-replacement edit script (`edits.py`), so it rebuilds from its record.
Its flip costs are upper bounds, like adaptive's.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

from margin.cost import CostModel
from margin.runrecord import DEFAULT_MAX_CALLS, DEFAULT_SEED
from margin.search.candidates import Candidates
from margin.search.edits import Op
from margin.search.planned import Asks, OutOfCalls, PlannedSearch
from margin.transforms.words import word_spans
from margin.types import Candidate, Flip, Prompt

SIGMA = 0.4
#: samples asked a round: one, so a prompt's guard calls are exactly the calls to its first
#: flip (the attack-success-vs-calls curve reads them); the driver batches across prompts.
SAMPLES_PER_ROUND = 1


def augment(text: str, rng: random.Random, sigma: float = SIGMA) -> str:
    """One Best-of-N sample of `text`: scrambling, random capitalisation, character noise."""
    chars = list(text)
    for start, end in word_spans(text):
        if end - start > 3 and rng.random() < sigma ** 0.5:
            middle = chars[start + 1 : end - 1]
            rng.shuffle(middle)
            chars[start + 1 : end - 1] = middle
    chars = [c.swapcase() if rng.random() < sigma ** 0.5 and len(c.swapcase()) == 1 else c for c in chars]
    out = []
    for c in chars:
        if 32 <= ord(c) <= 126 and rng.random() < sigma ** 3:
            c = chr(min(126, max(32, ord(c) + rng.choice((-1, 1)))))
        out.append(c)
    return "".join(out)


def sample_rng(seed: int, text: str, k: int) -> random.Random:
    digest = hashlib.sha256(f"bon/{seed}/{k}/{text}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class BestOfNSearch(PlannedSearch):
    """Random augmentations, SAMPLES_PER_ROUND at a time, until one flips (see the module)."""

    def __init__(self, prompt: Prompt, original: Candidate, candidates: Sequence[Candidate] | Candidates,
                 budget: float, *, cost_model: CostModel, seed: int = DEFAULT_SEED, max_calls: int = DEFAULT_MAX_CALLS,
                 incumbent: Flip | None = None) -> None:
        args = dict(prompt=prompt, original=original, candidates=candidates, budget=budget,
                    cost_model=cost_model, seed=seed, max_calls=max_calls, incumbent=incumbent)
        super().__init__(prompt, original, candidates, budget, cost_model=cost_model, seed=seed,
                         max_calls=max_calls, args=args)
        self._start()

    def _plan(self) -> Asks:
        try:
            if not (yield from self._original_is_right()):
                return
            k = 0
            while self.best() is None and len(self.issued) < self.max_calls and k < 50 * self.max_calls:
                round_ = []
                while len(round_) < SAMPLES_PER_ROUND and k < 50 * self.max_calls:  # a short text repeats
                    text = augment(self.text, sample_rng(self.seed, self.text, k))
                    k += 1
                    if text != self.text:
                        round_.append(self._candidate([Op.replace(0, len(self.text), text)]))
                yield from self._ask(round_)
        except OutOfCalls:
            return
