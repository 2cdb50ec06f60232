"""Wrappers: the prompt unchanged, inside a frame. Their texts are data files in `wrappers/`."""

from __future__ import annotations

import functools
from importlib import resources

import yaml

from margin.transforms.base import WrapperTransform


@functools.cache
def load_wrappers() -> tuple[WrapperTransform, ...]:
    """Every `wrappers/*.yaml` file: name, family, assumption and named variants with {prompt}."""
    folder = resources.files("margin").joinpath("transforms", "wrappers")
    wrappers = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yaml"):
            continue
        spec = yaml.safe_load(entry.read_text("utf-8"))
        wrappers.append(
            WrapperTransform(
                name=spec["name"],
                family=spec["family"],
                variants={str(k): str(v) for k, v in spec["variants"].items()},
                assumption=spec["assumption"],
            )
        )
    return tuple(wrappers)
