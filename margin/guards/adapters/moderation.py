"""Moderation APIs: OpenAI (`omni-moderation`) and Mistral (`mistral-moderation`).

Input: the raw text, many texts per request. The text sent is the case's target text alone (its
prompt, or its response for a response case): the API takes texts, not conversations or
policies, so a case with turns before its judged exchange, or with a policy, is refused
rather than judged without them. OpenAI: the verdict is `flagged` (OpenAI's own
thresholds); Mistral: unsafe when a selected category is true, where the selection is every
category the response reports except the advice / PII ones (health, financial, law, pii),
or `options.categories`. p_unsafe is the largest category score (of the selection for
Mistral): a proxy, not a calibrated probability. With an explicit threshold, the verdict is
p_unsafe >= threshold instead of the vendor's flags. A result without the expected fields
is `invalid`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from margin.errors import InputError
from margin.guards.adapters.preset import Preset
from margin.guards.shapes import Shapes
from margin.types import TARGETS, Verdict
from margin.util.hashing import canonical_json

NOT_HARM = frozenset({"health", "financial", "law", "pii"})


class Moderation:
    family: ClassVar[str]
    labels: ClassVar[str]
    path: ClassVar[str] = "/moderations"
    #: the target turn's text alone: a prompt, or a response without the prompt it answers
    shapes: ClassVar[Shapes] = Shapes(targets=TARGETS)

    def __init__(self, variant: str = "", options: Mapping[str, Any] | None = None) -> None:
        self.variant = variant
        self.options = dict(options or {})

    def body(self, model: str, texts: list[str]) -> dict[str, Any]:
        return {"model": model, "input": texts}

    def results(self, response: Any) -> list[Any] | None:
        results = response.get("results") if isinstance(response, dict) else None
        return results if isinstance(results, list) else None

    def parse(self, result: Any) -> Verdict:
        """The vendor's own verdict (its flags); the guard applies a threshold on top."""
        raise NotImplementedError

    def template(self) -> str:
        return canonical_json({"family": self.family, "endpoint": self.path, "input": ["{prompt}"],
                               "options": self.options})

    def params(self) -> dict[str, str]:
        return {f"option.{k}": canonical_json(v) for k, v in sorted(self.options.items())}

    def caveats(self) -> tuple[str, ...]:
        return ("p_unsafe is the largest per-category score, a proxy rather than a probability",)


def _scores(result: Any) -> dict[str, float] | None:
    scores = result.get("category_scores") if isinstance(result, dict) else None
    if not isinstance(scores, dict) or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                               for v in scores.values()):
        return None
    return {str(k): float(v) for k, v in scores.items()}


class OpenAIModeration(Moderation):
    family = "openai-moderation"
    labels = "unsafe = flagged (OpenAI's category thresholds), or max category score >= threshold"

    def __init__(self, variant: str = "", options: Mapping[str, Any] | None = None) -> None:
        super().__init__(variant, options)
        if self.options:
            raise InputError("the OpenAI moderation guard takes no options", field=f"options.{sorted(self.options)[0]}")

    def parse(self, result: Any) -> Verdict:
        raw = canonical_json(result)
        scores = _scores(result)
        flagged = result.get("flagged") if isinstance(result, dict) else None
        if scores is None or not isinstance(flagged, bool):
            return Verdict("invalid", raw=raw)
        p = max(scores.values(), default=0.0)
        return Verdict("unsafe" if flagged else "safe", p, raw)


class MistralModeration(Moderation):
    family = "mistral-moderation"
    labels = "unsafe = a selected category is true (default: all but health, financial, law, pii)"

    def __init__(self, variant: str = "", options: Mapping[str, Any] | None = None) -> None:
        super().__init__(variant, options)
        unknown = sorted(set(self.options) - {"categories"})
        if unknown:
            raise InputError("allowed: categories", field=f"options.{unknown[0]}")
        chosen = self.options.get("categories")
        if chosen is not None and (not isinstance(chosen, list) or not chosen
                                   or not all(isinstance(c, str) for c in chosen)):
            raise InputError("must be a non-empty list of category names", field="options.categories")
        self.categories = frozenset(chosen) if chosen else None

    def selected(self, keys: set[str]) -> set[str]:
        return keys & self.categories if self.categories is not None else keys - NOT_HARM

    def parse(self, result: Any) -> Verdict:
        raw = canonical_json(result)
        scores = _scores(result)
        flags = result.get("categories") if isinstance(result, dict) else None
        if scores is None or not isinstance(flags, dict) or not all(isinstance(v, bool) for v in flags.values()):
            return Verdict("invalid", raw=raw)
        chosen = self.selected(set(flags) | set(scores))
        p = max((scores[k] for k in chosen if k in scores), default=0.0)
        return Verdict("unsafe" if any(flags.get(k, False) for k in chosen) else "safe", p, raw)

    def caveats(self) -> tuple[str, ...]:
        chosen = sorted(self.categories) if self.categories is not None else f"all but {', '.join(sorted(NOT_HARM))}"
        return (*super().caveats(), f"categories counted as unsafe: {chosen}")

#: The families this module defines (margin.guards.adapters.families gathers them).
ADAPTERS = (OpenAIModeration, MistralModeration)

#: The presets of this family, as `margin guards list` lists them (`margin.guards.presets` gathers
#: every module's).
PRESETS = (
    Preset("openai-moderation", "openai-moderation", "", "omni-moderation-latest", "OpenAI moderation API",
           backends=("openai",), backend="openai", threshold=None, base_url="https://api.openai.com/v1",
           api_key_env="OPENAI_API_KEY", revision="latest"),
    Preset("mistral-moderation", "mistral-moderation", "", "mistral-moderation-latest", "Mistral moderation API",
           backends=("openai",), backend="openai", threshold=None, base_url="https://api.mistral.ai/v1",
           api_key_env="MISTRAL_API_KEY", revision="latest"),
)
