"""TextAttack's character-level recipes against a guard served over HTTP: the peer half of
`benchmarks/peer.py`, which starts it. It runs in TextAttack's own virtual environment
(TextAttack pins transformers 4.x; margin needs 5.x), so it imports nothing of margin: only
the standard library and TextAttack.

    python peer_textattack.py --setup     # once: what TextAttack's first import needs
    python peer_textattack.py --recipe deepwordbug|pruthi|textbugger-char \
        --url http://127.0.0.1:PORT --prompts IN.jsonl --out OUT.jsonl

TextAttack's first import runs a post-install step that downloads NLTK data unless a marker
file is in its cache folder (TA_CACHE_DIR, default ~/.cache/textattack), and DeepWordBug
reads NLTK's English stopword list. `--setup` writes both, with no network: the marker, and
the list (NLTK's 179 English stopwords) into this environment's NLTK data path. TextAttack
0.3.11's wheel also lacks `textattack/shared/intentional_homoglyphs.txt`, which its homoglyph
swap opens when built (so TextBugger as shipped fails there); `--setup` writes an empty one,
which TextBugger's swaps never read (they use the class's own table of 38 look-alikes).

IN.jsonl has one {"id", "text", "label"} per line (label "safe" or "unsafe": the guard's
correct answer, which the attack tries to change). The guard is a two-class model whose
class 1 probability is the p_unsafe that POST URL/p_unsafe {"texts": [...]} returns.
OUT.jsonl gets one {"id", "status", "text", "queries", "guard_calls"} per prompt: status is
successful, failed or skipped, text the perturbed text, queries TextAttack's own count of
model queries (the original included, repeats included), guard_calls the texts it actually
sent to the guard for that prompt (its cache answers repeats: margin's count is of these).

The recipes (`RECIPES`; none downloads anything):
- deepwordbug: `DeepWordBugGao2018` as shipped: words ranked by the change in the guard's
  score when each is replaced by "[UNK]", then per word, in that order, the best of one random
  neighbour swap, substitution, deletion and insertion, kept greedily until the label
  changes; stopwords are never edited.
- pruthi: `Pruthi2019` as shipped (one word edited at most, words of 4+ letters, not
  stopwords; every neighbour swap, deletion, insertion and QWERTY-neighbour substitution of
  an inner letter, by greedy search).
- textbugger-char: `TextBuggerLi2018`'s character-level half: its four character
  transformations as shipped (insert a space inside a word, delete an inner letter, swap two
  inner neighbours, one random choice each; homoglyph swaps), its RepeatModification and
  StopwordModification constraints, its goal and its search (greedy, words ranked by deleting
  each). Left out: WordSwapEmbedding (word-embedding synonyms, a download) and the Universal
  Sentence Encoder constraint (a TensorFlow Hub download), which only filters the synonyms'
  sentences at threshold 0.8.
Python's, NumPy's and torch's generators are seeded with --seed before each prompt, so each
prompt's attack is the same whatever the subset it runs in.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # peer_http, beside this script

from peer_http import guard_scores  # noqa: E402

LABELS = {"safe": 0, "unsafe": 1}
MARKER = "post_install_check_3"  # the file TextAttack 0.3.11 looks for before its post-install step
NLTK_ENGLISH_STOPWORDS = """
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he
him his himself she she's her hers herself it it's its itself they them their theirs themselves what
which who whom this that that'll these those am is are was were be been being have has had having do
does did doing a an the and but if or because as until while of at by for with about against between
into through during before after above below to from up down in out on off over under again further
then once here there when where why how all any both each few more most other some such no nor not
only own same so than too very s t can will just don don't should should've now d ll m o re ve y ain
aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't
ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't
won won't wouldn wouldn't
"""


def cache_dir() -> Path:
    return Path(os.environ.get("TA_CACHE_DIR", os.path.expanduser("~/.cache/textattack")))


def stopwords_file() -> Path:
    return Path(sys.prefix) / "share" / "nltk_data" / "corpora" / "stopwords" / "english"


def homoglyphs_file() -> Path:
    """Where WordSwapHomoglyphSwap reads Unicode's intentional homoglyphs (found without
    importing TextAttack, whose first import wants the marker)."""
    import importlib.util

    spec = importlib.util.find_spec("textattack")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("error: TextAttack is not installed in this environment")
    return Path(list(spec.submodule_search_locations)[0]) / "shared" / "intentional_homoglyphs.txt"


def setup() -> None:
    """Write the post-install marker and NLTK's English stopword list (no download), and, if
    the wheel lacks it, an empty homoglyph table for WordSwapHomoglyphSwap."""
    marker = cache_dir() / MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.touch()
    words = stopwords_file()
    words.parent.mkdir(parents=True, exist_ok=True)
    listed = NLTK_ENGLISH_STOPWORDS.split()
    words.write_text("\n".join(listed) + "\n", encoding="utf-8")
    print(f"wrote {marker} and {words} ({len(listed)} words)")
    # TextAttack 0.3.11's wheel lacks the file its homoglyph swap opens on construction; the
    # table is read only by its differential-evolution path (BadCharacters2021), never by
    # TextBugger's word swaps, which use the class's own letter table.
    table = homoglyphs_file()
    if not table.exists():
        table.write_text("# empty: TextBugger's homoglyph swap does not read it\n", encoding="utf-8")
        print(f"wrote {table}")


def check_setup() -> None:
    missing = [str(p) for p in (cache_dir() / MARKER, stopwords_file(), homoglyphs_file()) if not p.is_file()]
    if missing:
        sys.exit(f"error: run this script with --setup first (missing: {', '.join(missing)})")


RECIPES = ("deepwordbug", "pruthi", "textbugger-char")


def build(recipe: str, guard: Any) -> Any:
    """The TextAttack attack of `recipe` on `guard` (a ModelWrapper)."""
    from textattack import Attack
    from textattack.attack_recipes import DeepWordBugGao2018, Pruthi2019
    from textattack.constraints.pre_transformation import RepeatModification, StopwordModification
    from textattack.goal_functions import UntargetedClassification
    from textattack.search_methods import GreedyWordSwapWIR
    from textattack.transformations import (
        CompositeTransformation,
        WordSwapHomoglyphSwap,
        WordSwapNeighboringCharacterSwap,
        WordSwapRandomCharacterDeletion,
        WordSwapRandomCharacterInsertion,
    )

    if recipe == "deepwordbug":
        return DeepWordBugGao2018.build(guard)
    if recipe == "pruthi":
        return Pruthi2019.build(guard)
    # TextBuggerLi2018.build, written out without WordSwapEmbedding and the sentence encoder
    # (building the recipe itself would download the embedding); the rest as shipped.
    transformation = CompositeTransformation([
        WordSwapRandomCharacterInsertion(random_one=True, letters_to_insert=" ", skip_first_char=True,
                                         skip_last_char=True),
        WordSwapRandomCharacterDeletion(random_one=True, skip_first_char=True, skip_last_char=True),
        WordSwapNeighboringCharacterSwap(random_one=True, skip_first_char=True, skip_last_char=True),
        WordSwapHomoglyphSwap(),
    ])
    return Attack(UntargetedClassification(guard), [RepeatModification(), StopwordModification()], transformation,
                  GreedyWordSwapWIR(wir_method="delete"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setup", action="store_true", help="write what TextAttack's first import needs, then exit")
    parser.add_argument("--url")
    parser.add_argument("--prompts", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recipe", choices=RECIPES, default="deepwordbug")
    args = parser.parse_args()
    if args.setup:
        setup()
        return
    if not (args.url and args.prompts and args.out):
        parser.error("--url, --prompts and --out are required (or --setup)")
    check_setup()

    import numpy as np
    import textattack
    import torch
    from textattack.attack_results import (
        FailedAttackResult,
        SkippedAttackResult,
        SuccessfulAttackResult,
    )

    class HttpGuard(textattack.models.wrappers.ModelWrapper):
        def __init__(self) -> None:
            self.model = None  # TextAttack reads it; the model lives behind the URL
            self.sent = 0

        def __call__(self, text_input_list: list[str], **kwargs: Any) -> Any:
            self.sent += len(text_input_list)
            p = np.array(guard_scores(args.url, list(text_input_list)))
            return np.stack([1.0 - p, p], axis=1)

    guard = HttpGuard()
    attack = build(args.recipe, guard)
    rows = [json.loads(line) for line in args.prompts.read_text("utf-8").splitlines() if line.strip()]
    with args.out.open("w", encoding="utf-8") as out:
        for row in rows:
            random.seed(args.seed)
            np.random.seed(args.seed)
            torch.manual_seed(args.seed)
            guard.sent = 0
            result = attack.attack(row["text"], LABELS[row["label"]])
            status = {SuccessfulAttackResult: "successful", FailedAttackResult: "failed",
                      SkippedAttackResult: "skipped"}[type(result)]
            out.write(json.dumps({"id": row["id"], "status": status, "text": result.perturbed_result.attacked_text.text,
                                  "queries": result.num_queries, "guard_calls": guard.sent}) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
