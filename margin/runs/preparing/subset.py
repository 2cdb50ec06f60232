"""`--limit N`: which N prompts of the dataset a run searches.

A stratified, seeded sample: each label keeps its share of the dataset (largest remainders,
and at least one prompt per label when N allows), drawn with the run's seed and kept in
dataset order. The first N rows would do for a shuffled file, but datasets are often sorted by
label (the sample's first 24 prompts are all safe): `--limit 10` gave no unsafe prompt at all.
Runs made before the sample recorded nothing about it in run.json and took the first N
(`method="first"`), which `margin score` and `margin merge` still rebuild.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from margin.runrecord import LimitMethod, LimitSample
from margin.types import Prompt

METHODS: tuple[str, ...] = ("stratified", "first")


def limit_prompts(prompts: Sequence[Prompt], limit: int | None, seed: int,
                  method: LimitMethod = "stratified") -> tuple[Prompt, ...]:
    """The prompts a run with `--limit limit --seed seed` searches, in dataset order."""
    if not limit or limit >= len(prompts):
        return tuple(prompts)
    if method == "first":
        return tuple(prompts[:limit])
    by_label: dict[str, list[int]] = {}
    for index, prompt in enumerate(prompts):
        by_label.setdefault(prompt.label, []).append(index)
    chosen: list[int] = []
    for label, count in quotas({k: len(v) for k, v in by_label.items()}, limit).items():
        rng = random.Random(f"margin-limit/{seed}/{label}")  # a str seed: the same draw on every platform
        chosen += rng.sample(by_label[label], count)
    return tuple(prompts[i] for i in sorted(chosen))


def quotas(sizes: dict[str, int], n: int) -> dict[str, int]:
    """How many of `n` each label gets: its share of `sizes`, rounded by largest remainder
    (ties to the label that sorts first), then at least one each while `n` allows."""
    total = sum(sizes.values())
    exact = {label: n * size / total for label, size in sizes.items()}
    out = {label: int(share) for label, share in exact.items()}
    by_remainder = sorted(sizes, key=lambda label: (-(exact[label] - out[label]), label))
    for label in by_remainder[: n - sum(out.values())]:
        out[label] += 1
    for label in sorted(sizes):
        if out[label] == 0 and n >= len(sizes):
            donor = max(sorted(out), key=lambda k: out[k])
            out[donor] -= 1
            out[label] += 1
    return out


def limit_record(prompts: Sequence[Prompt], limit: int | None, method: LimitMethod) -> LimitSample | None:
    """run.json's account of the sample (nothing without --limit, or for a run made before it)."""
    if not limit or method == "first":
        return None
    counts = tuple((label, sum(p.label == label for p in prompts)) for label in sorted({p.label for p in prompts}))
    return LimitSample(method, counts)


def describe(sample: LimitSample, total: int) -> str:
    """One line for the console: `--limit 10: a stratified sample of 10 of 48 prompts (...)`."""
    counts = ", ".join(f"{n} {label}" for label, n in sample.by_label)
    size = sum(n for _, n in sample.by_label)
    return (f"--limit: a {sample.method} sample of {size} of {total} prompts ({counts}; in the dataset's "
            f"proportions, drawn with --seed)")
