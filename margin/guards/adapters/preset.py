"""A preset: a guard name with its family adapter, default checkpoint, revision and backend.

Each adapter module lists its family's presets beside its code, in a module-level `PRESETS`
tuple; `margin.guards.presets` gathers them. A revision is a commit SHA where one is recorded;
those come from public third-party pins and were not verified here (there is no network):
`revision_verified` says so. Presets without a known commit load the branch `main` and say so
in their caveats; pin one with `--model REPO@COMMIT` or `revision:` in a guard file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from margin.backends.registry import BACKENDS

#: A generative guard runs on every chat backend.
CHAT_BACKENDS = tuple(BACKENDS)


@dataclass(frozen=True)
class Preset:
    name: str
    family: str
    variant: str
    checkpoint: str
    description: str
    revision: str | None = None
    backends: tuple[str, ...] = CHAT_BACKENDS
    backend: str = "transformers"
    threshold: float | None = 0.5
    options: dict[str, Any] = field(default_factory=dict)
    base_url: str | None = None
    api_key_env: str | None = None
    auto_class: str = "causal"
    lora_base: str | None = None  # the checkpoint is a LoRA adapter on this base model
    revision_verified: bool = False
