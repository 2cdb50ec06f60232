"""What the `decode` defence finds in a suite's candidates, per transform; no guard is called.

    python benchmarks/decode.py                                 # XSTest, standard suite
    python benchmarks/decode.py --dataset sample --suite quick

For every candidate it counts how often `decode` finds a decoded text and, for the
encoding wrappers and the smuggling edits, how often one of them holds the original prompt
(the decoding a guard needs to see). A decoding found elsewhere costs a guard call and
changes nothing unless the guard reads the decoded text differently.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from margin.guards.decode import decodings  # noqa: E402
from margin.runs.preparing.config import RunConfig  # noqa: E402
from margin.runs.preparing.prepare import prepare_inputs  # noqa: E402

#: Transforms a guard needs decoded: the original prompt should come back.
ENCODED = ("base64", "rot13", "reversal", "tag-smuggling", "variation-selector-smuggling")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="xstest")
    parser.add_argument("--suite", default="standard")
    args = parser.parse_args()
    prepared = prepare_inputs(RunConfig(guard="keyword", dataset=args.dataset, suite=args.suite))
    texts = {p.id: p.text for p in prepared.prompts}
    total, found, recovered = Counter(), Counter(), Counter()
    started = time.perf_counter()
    originals = sum(bool(decodings(t)) for t in texts.values())
    for prompt in prepared.prompts:
        prompt_id = prompt.id
        for c in prepared.all_candidates(prompt):
            decoded = decodings(c.text)
            total[c.transform] += 1
            found[c.transform] += bool(decoded)
            recovered[c.transform] += any(texts[prompt_id] in d.text for d in decoded)
    elapsed = time.perf_counter() - started
    candidates = sum(total.values())
    print(f"{args.dataset}, {args.suite} suite: {len(texts)} prompts, {candidates} candidates, "
          f"{1e6 * elapsed / (candidates + len(texts)):.0f} µs a text")
    print(f"originals with a decoding: {originals} of {len(texts)}")
    print("transform | candidates | with a decoding | original prompt recovered")
    for name in sorted(total, key=lambda n: (n not in ENCODED, -found[n], n)):
        if found[name] or name in ENCODED:
            print(f"{name} | {total[name]} | {found[name]} | {recovered[name] if name in ENCODED else ''}")
    others = sum(found[n] for n in total if n not in ENCODED)
    rest = sum(total[n] for n in total if n not in ENCODED)
    print(f"other transforms: a decoding in {others} of {rest} candidates ({100 * others / rest:.1f}%)")


if __name__ == "__main__":
    main()
