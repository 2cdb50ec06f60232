"""Wrappers: the prompt, perhaps encoded, inside a frame. Their texts are data files in
`wrappers/`, one transform a file:

    name: quote
    family: frame
    assumption: one line on why a model still answers the request
    encoding: json-string        # optional: applied to the prompt for every variant
    visible: true                # optional (default true)
    variants:
      quotes: 'Someone wrote: "{prompt}"'
      markdown: {template: "> {prompt}", encoding: quote-lines}   # a per-variant encoding

Encodings are the pure functions named in `encodings.ENCODERS`.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from margin.transforms.base import Encoder, WrapperTransform
from margin.transforms.encodings import ENCODERS
from margin.util.yamlfile import parse_yaml


def encoder(name: Any, where: str) -> Encoder:
    if name not in ENCODERS:
        raise ValueError(f"{where}: unknown encoding {name!r}; known: {', '.join(ENCODERS)}")
    return ENCODERS[name]


def parse_wrapper(spec: dict[str, Any], source: str) -> WrapperTransform:
    variants: dict[str, str] = {}
    encode: dict[str, Encoder] = {}
    default = encoder(spec["encoding"], source) if "encoding" in spec else None
    for key, value in spec["variants"].items():
        key = str(key)
        if isinstance(value, dict):
            variants[key] = str(value["template"])
            chosen = encoder(value["encoding"], f"{source} variant {key}") if "encoding" in value else default
        else:
            variants[key] = str(value)
            chosen = default
        if chosen is not None:
            encode[key] = chosen
    return WrapperTransform(
        name=str(spec["name"]),
        family=str(spec["family"]),
        variants=variants,
        assumption=str(spec["assumption"]),
        encode=encode,
        visible=bool(spec.get("visible", True)),
    )


def load_wrappers() -> tuple[WrapperTransform, ...]:
    """Every `wrappers/*.yaml` file, in file-name order."""
    folder = resources.files("margin").joinpath("transforms", "wrappers")
    wrappers = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".yaml"):
            wrappers.append(parse_wrapper(parse_yaml(entry.read_bytes(), f"wrappers/{entry.name}")[0], f"wrappers/{entry.name}"))
    return tuple(wrappers)


ORDER = 110  # after every other module: bidi's wrapper comes before these
TRANSFORMS = load_wrappers()
