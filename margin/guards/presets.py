"""Guard presets: a name with its family adapter, default checkpoint, revision and backend.

A revision is a commit SHA where one is recorded; those come from public third-party pins
and were not verified here (there is no network): `revision_verified` says so. Presets
without a known commit load the branch `main` and say so in their caveats; pin one with
`--model REPO@COMMIT` or `revision:` in a guard file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from margin.backends.registry import BACKENDS
from margin.guards.adapters.base import Adapter
from margin.guards.adapters.families import FAMILIES
from margin.guards.shapes import Shapes

#: The generative families (a chat template and a served or local model), read from the one table.
GENERATIVE: dict[str, type[Adapter]] = {f: cls for f, cls in FAMILIES.items() if issubclass(cls, Adapter)}
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

    @property
    def shapes(self) -> Shapes:
        """The cases its adapter renders."""
        family = FAMILIES[self.family]
        return family.shapes_for(self.variant) if issubclass(family, Adapter) else family.shapes

    @property
    def labels(self) -> str:
        return FAMILIES[self.family].labels


def _p(name: str, family: str, variant: str, checkpoint: str, description: str, **kw: Any) -> Preset:
    return Preset(name, family, variant, checkpoint, description, **kw)


PRESET_LIST = [
    _p("llama-guard-3-1b", "llama-guard", "3-1b", "meta-llama/Llama-Guard-3-1B", "Llama Guard 3 1B (Meta)",
       revision="acf7aafa60f0410f8f42b1fa35e077d705892029"),
    _p("llama-guard-3-8b", "llama-guard", "3-8b", "meta-llama/Llama-Guard-3-8B", "Llama Guard 3 8B (Meta)"),
    _p("llama-guard-4", "llama-guard", "4", "meta-llama/Llama-Guard-4-12B", "Llama Guard 4 12B (Meta)",
       auto_class="image-text-to-text"),
    _p("shieldgemma-2b", "shieldgemma", "2b", "google/shieldgemma-2b", "ShieldGemma 2B (Google)",
       revision="d1dffc9c8c9237a90aab09c61383791e718ef9e8"),
    _p("shieldgemma-9b", "shieldgemma", "9b", "google/shieldgemma-9b", "ShieldGemma 9B (Google)"),
    _p("shieldgemma-27b", "shieldgemma", "27b", "google/shieldgemma-27b", "ShieldGemma 27B (Google)"),
    _p("wildguard", "wildguard", "", "allenai/wildguard", "WildGuard 7B (AI2)"),
    _p("granite-guardian-3.0-2b", "granite-guardian", "3.0", "ibm-granite/granite-guardian-3.0-2b",
       "Granite Guardian 3.0 2B (IBM)"),
    _p("granite-guardian-3.0-8b", "granite-guardian", "3.0", "ibm-granite/granite-guardian-3.0-8b",
       "Granite Guardian 3.0 8B (IBM)"),
    _p("granite-guardian-3.1-2b", "granite-guardian", "3.1", "ibm-granite/granite-guardian-3.1-2b",
       "Granite Guardian 3.1 2B (IBM)", revision="81145486e85c6c82c01e759c0356d9d6da4d21a5"),
    _p("granite-guardian-3.1-8b", "granite-guardian", "3.1", "ibm-granite/granite-guardian-3.1-8b",
       "Granite Guardian 3.1 8B (IBM)"),
    _p("granite-guardian-3.2-3b-a800m", "granite-guardian", "3.2", "ibm-granite/granite-guardian-3.2-3b-a800m",
       "Granite Guardian 3.2 3B-A800M MoE (IBM)", revision="3de033d89b499a18d9a573b5192bf3b967ef48c5"),
    _p("granite-guardian-3.2-5b", "granite-guardian", "3.2", "ibm-granite/granite-guardian-3.2-5b",
       "Granite Guardian 3.2 5B (IBM)"),
    _p("granite-guardian-3.3-8b", "granite-guardian", "3.3", "ibm-granite/granite-guardian-3.3-8b",
       "Granite Guardian 3.3 8B, no think (IBM)", options={"think": False}),
    _p("granite-guardian-3.3-8b-think", "granite-guardian", "3.3", "ibm-granite/granite-guardian-3.3-8b",
       "Granite Guardian 3.3 8B, think mode (IBM)", options={"think": True}),
    _p("qwen3guard-gen-0.6b", "qwen3guard-gen", "", "Qwen/Qwen3Guard-Gen-0.6B", "Qwen3Guard-Gen 0.6B"),
    _p("qwen3guard-gen-4b", "qwen3guard-gen", "", "Qwen/Qwen3Guard-Gen-4B", "Qwen3Guard-Gen 4B"),
    _p("qwen3guard-gen-8b", "qwen3guard-gen", "", "Qwen/Qwen3Guard-Gen-8B", "Qwen3Guard-Gen 8B"),
    _p("nemoguard-8b-content-safety", "nemoguard", "v2", "nvidia/llama-3.1-nemoguard-8b-content-safety",
       "NemoGuard 8B content safety (Nemotron Safety Guard v2; LoRA on Llama 3.1 8B Instruct)",
       lora_base="meta-llama/Llama-3.1-8B-Instruct"),
    _p("nemotron-safety-guard-multilingual-8b-v1", "nemoguard", "multilingual-v1",
       "nvidia/Llama-3.1-Nemotron-Safety-Guard-Multilingual-8B-v1",
       "Nemotron Safety Guard multilingual 8B v1 (LoRA on Llama 3.1 8B Instruct)",
       lora_base="meta-llama/Llama-3.1-8B-Instruct"),
    _p("nemotron-safety-guard-8b-v3", "nemoguard", "v3", "nvidia/Llama-3.1-Nemotron-Safety-Guard-8B-v3",
       "Nemotron Safety Guard 8B v3 (NVIDIA)"),
    _p("gpt-oss-safeguard-20b", "gpt-oss-safeguard", "20b", "openai/gpt-oss-safeguard-20b",
       "gpt-oss-safeguard 20B with margin's binary harm policy"),
    _p("gpt-oss-safeguard-120b", "gpt-oss-safeguard", "120b", "openai/gpt-oss-safeguard-120b",
       "gpt-oss-safeguard 120B with margin's binary harm policy"),
    _p("prompt-guard-2-86m", "sequence-classifier", "prompt-guard-2", "meta-llama/Llama-Prompt-Guard-2-86M",
       "Llama Prompt Guard 2 86M: prompt-attack detector (Meta)", backends=("transformers",),
       revision="a8ded8e697ce7c355e395a0df51f94adb4a2fd27"),
    _p("prompt-guard-2-22m", "sequence-classifier", "prompt-guard-2", "meta-llama/Llama-Prompt-Guard-2-22M",
       "Llama Prompt Guard 2 22M: prompt-attack detector (Meta)", backends=("transformers",),
       revision="11614a155199674a0a95e6602d6ab0417b790ed0"),
    _p("protectai-prompt-injection-v2", "sequence-classifier", "protectai",
       "protectai/deberta-v3-base-prompt-injection-v2",
       "ProtectAI DeBERTa v3 prompt-injection detector v2", backends=("transformers",),
       revision="90c9989b1a342275dd0d1a95aad283c04e075671"),
    _p("openai-moderation", "openai-moderation", "", "omni-moderation-latest", "OpenAI moderation API",
       backends=("openai",), backend="openai", threshold=None, base_url="https://api.openai.com/v1",
       api_key_env="OPENAI_API_KEY", revision="latest"),
    _p("mistral-moderation", "mistral-moderation", "", "mistral-moderation-latest", "Mistral moderation API",
       backends=("openai",), backend="openai", threshold=None, base_url="https://api.mistral.ai/v1",
       api_key_env="MISTRAL_API_KEY", revision="latest"),
]
PRESETS: dict[str, Preset] = {p.name: p for p in PRESET_LIST}


def check_families(presets: list[Preset]) -> None:
    """A programming error, raised at import: a preset whose family's module does not list
    its class in ADAPTERS."""
    unlisted = sorted({p.family for p in presets} - set(FAMILIES))
    if unlisted:
        raise RuntimeError(f"presets name families no adapter module lists in ADAPTERS: {unlisted}")


check_families(PRESET_LIST)

#: The `prompted` kind: any instruct model (`model:` names it; there is no default) told
#: `options.policy` and read by `options.labels` (words) or `options.pattern` (a regex). It is
#: built as a preset is, but it is not one: it has no checkpoint of its own.
PROMPTED = Preset("prompted", "prompted", "", "", "any instruct model told options.policy, read by "
                  "options.labels (words) or options.pattern (a regex)", backend="openai")


def preset_of(name: str) -> Preset:
    """The preset named `name`, or the `prompted` kind's."""
    return PROMPTED if name == PROMPTED.name else PRESETS[name]


def find_preset(name: str) -> Preset | None:
    """The preset (or the `prompted` kind's) a guard name builds on; None for keyword,
    minilm and python: guards."""
    return PROMPTED if name == PROMPTED.name else PRESETS.get(name)
