"""Guards: the `Guard` protocol, the kinds `--guard` names (presets, keyword, minilm,
python:FILE.py:Class; `kinds`) and YAML guard files, their specs, and the family adapters
(each family's template and parse rule). How requests reach a model is `margin.backends`'."""

from margin.guards.base import Guard
from margin.guards.make import load_guard

__all__ = ["Guard", "load_guard"]
