"""refusal-rules held out: choose its opening window on two labels files, report on the third.

    python scripts/refusal_rules_rotation.py A.csv B.csv C.csv

For each file in turn, the window (`OPENING_CHARS` candidates below) with the best kappa
(comply vs not comply) on the other files together is kept and scored on the held-out file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from margin.judges.agreement import cohen_kappa
from margin.judges.labels import COMPLY, read_labels
from margin.judges.rules import classify

GRID = (40, 60, 80, 100, 120, 150, 200, 300, 500)


def kappa(cases, chars: int) -> float | None:
    truth = [c.final_label == COMPLY for c in cases]
    judged = [classify(c.completion, chars) == "complies" for c in cases]
    return cohen_kappa([str(t) for t in truth], [str(j) for j in judged])


def main(paths: list[Path]) -> None:
    files = {p.stem: read_labels(p).cases for p in paths}
    for held, cases in files.items():
        tuning = [c for name, cs in files.items() if name != held for c in cs]
        best = max(GRID, key=lambda g: (kappa(tuning, g) or -1.0, -g))
        print(f"held out {held}: window {best} (tuning kappa {kappa(tuning, best):.3f}), "
              f"held-out kappa {kappa(cases, best):.3f}")
    every = [c for cs in files.values() for c in cs]
    from margin.judges.rules import OPENING_CHARS
    print(f"all files, window {OPENING_CHARS}: kappa {kappa(every, OPENING_CHARS):.3f}")


if __name__ == "__main__":
    main([Path(a) for a in sys.argv[1:]])
