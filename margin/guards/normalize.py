"""Defences: named input clean-ups in front of a guard, and the guard wrapper that runs them.

`--normalize NAME` runs a guard behind the pre-processing a deployment might add, so a
user sees which robustness comes only from it (and `margin ablate` compares several). A
defence is one step or several joined by `+`:

- `nfkc`: Unicode NFKC;
- `strip-format`: drops format characters and variation selectors;
- `strip-marks`: NFD, drops combining marks, NFC;
- `skeleton`: the TR39 confusable skeleton;
- `decode`: also classifies every decoded text found in the text (smuggled tag and
  variation-selector characters, base64, base32, hex, binary, percent-encoding, HTML
  references, ROT13, reversal; see `margin.guards.decode`):
  the verdict is unsafe if any is unsafe, so one text can cost several guard calls;
- `all`: every step.

(`margin.guards.cleanups` and `margin.guards.decode` define the steps.) Steps always run in
one order, whatever order a name gives: strip-format, nfkc, strip-marks, then decode, then
skeleton, each clean-up applied to every decoded text too. Decode reads the text as given
(stripping format characters would delete smuggled tag and variation-selector text before
it could be read) and as the earlier steps leave it (which can reveal a payload split by
invisible characters; they leave ASCII alone); skeleton comes last since it rewrites
ASCII and would break a payload. A name is canonical with its steps in `STEP_ORDER`
(`nfkc+strip-format+skeleton+decode`), and `all` is written out, so one defence has one
name.

The wrapped guard's identity gains the defence: `+NAME` on its id, `normalize` in its
params, and for the steps added after the first three a `normalize_version` param (each
step's version, and the Unicode and data versions it depends on), so caches, receipts and
snapshots never mix verdicts from different pre-processing. `nfkc`, `strip-format` and
`nfkc+strip-format` keep exactly the identity they always had.
"""

from __future__ import annotations

import dataclasses
import json
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from margin.guards.base import Guard
from margin.guards.cleanups import nfkc, skeleton, strip_format, strip_marks
from margin.guards.decode import decodings
from margin.types import Exchange, GuardInfo, Verdict, VerdictLabel
from margin.util.suggest import did_you_mean

__all__ = ["NORMALIZATIONS", "STEP_ORDER", "NormalizingGuard", "canonical", "guard_texts", "normalize",
           "normalized_info", "steps_of", "strip_format"]


@dataclass(frozen=True, slots=True)
class CleanupStep:
    name: str
    version: int
    clean: Callable[[str], str] | None  # None: decode, which adds texts rather than rewriting one
    data: Callable[[], tuple[str, ...]] = lambda: ()  # what else its output depends on
    legacy: bool = False  # in margin before versions were recorded: its identity stays as it was


def _unicode() -> tuple[str, ...]:
    return (f"unicode {unicodedata.unidata_version}",)


def _skeleton_data() -> tuple[str, ...]:
    from margin.util.confusables import data_version

    return (*_unicode(), data_version())


def _decode_data() -> tuple[str, ...]:
    from margin.guards.decode import data_version

    return (data_version(),)


STEPS: dict[str, CleanupStep] = {
    "nfkc": CleanupStep("nfkc", 1, nfkc, legacy=True),
    "strip-format": CleanupStep("strip-format", 1, strip_format, legacy=True),
    "strip-marks": CleanupStep("strip-marks", 1, strip_marks, _unicode),
    "skeleton": CleanupStep("skeleton", 1, skeleton, _skeleton_data),
    "decode": CleanupStep("decode", 1, None, _decode_data),
}
#: How names are written.
STEP_ORDER = ("nfkc", "strip-format", "strip-marks", "skeleton", "decode")
#: How steps run (see the module docstring for why).
RUN_ORDER = ("strip-format", "nfkc", "strip-marks", "decode", "skeleton")
ALL = "all"
NONE = "none"
#: Single steps and `all`: what `margin ablate` offers by default and errors list.
NORMALIZATIONS = (*STEP_ORDER, ALL)


def steps_of(name: str) -> tuple[str, ...]:
    """The steps a defence name holds, in STEP_ORDER; ValueError names the known ones."""
    parts = [p.strip() for p in name.split("+")]
    if parts == [ALL]:
        return STEP_ORDER
    unknown = [p for p in parts if p not in STEPS]
    if unknown or not parts:
        bad = unknown[0] if unknown else name
        raise ValueError(f"unknown defence {bad!r}{did_you_mean(bad, (*STEP_ORDER, ALL))}; known: "
                         f"{', '.join((NONE, *NORMALIZATIONS))}, and steps joined by + "
                         f"(such as nfkc+strip-format+skeleton+decode)")
    return tuple(s for s in STEP_ORDER if s in parts)


def canonical(name: str) -> str:
    return "+".join(steps_of(name))


def _clean(text: str, steps: Sequence[str]) -> str:
    for step in steps:
        clean = STEPS[step].clean
        assert clean is not None
        text = clean(text)
    return text


def guard_texts(text: str, name: str) -> list[tuple[str | None, str]]:
    """What the guard reads for `text` behind defence `name`: (None, the cleaned text) first,
    then (encoding, cleaned decoded text) for each new one `decode` finds."""
    steps = steps_of(name)
    order = [s for s in RUN_ORDER if s in steps]
    cut = order.index("decode") if "decode" in order else len(order)
    before, after = order[:cut], [s for s in order[cut:] if s != "decode"]
    first = _clean(text, before)
    found: list[tuple[str | None, str]] = [(None, first)]
    if "decode" in steps:
        for source in dict.fromkeys((text, first)):
            found += [(d.encoding, _clean(d.text, before)) for d in decodings(source)]
    out: list[tuple[str | None, str]] = []
    seen: set[str] = set()
    for encoding, item in found:
        cleaned = _clean(item, after)
        if cleaned not in seen:
            seen.add(cleaned)
            out.append((encoding, cleaned))
    return out


def normalize(text: str, how: str) -> str:
    """The text the guard reads behind a defence without `decode` (one text in, one out)."""
    if "decode" in steps_of(how):
        raise ValueError("decode gives several texts; use guard_texts")
    return guard_texts(text, how)[0][1]


def version_of(name: str) -> str | None:
    """Versions of the non-legacy steps in `name` and the data they depend on; None when every
    step is legacy (their identity predates versions and stays as it was)."""
    steps = [STEPS[s] for s in steps_of(name) if not STEPS[s].legacy]
    if not steps:
        return None
    data = list(dict.fromkeys(part for s in steps for part in s.data()))
    return "+".join(f"{s.name}/{s.version}" for s in steps) + (f" ({'; '.join(data)})" if data else "")


def caveat_of(name: str) -> str:
    text = f"texts normalised ({name}) before the guard sees them"
    if "decode" in steps_of(name):
        text += "; decoded texts found in a text are classified too, unsafe if any is"
    return text


def normalized_info(base: GuardInfo, how: str) -> GuardInfo:
    """The identity of guard `base` behind defence `how` (given canonically)."""
    name = canonical(how)
    version = version_of(name)
    return dataclasses.replace(
        base,
        id=f"{base.id}+{name}",
        params=(*base.params, ("normalize", name), *((("normalize_version", version),) if version else ())),
        caveats=(*base.caveats, caveat_of(name)),
    )


def combine(verdicts: Sequence[Verdict | Exception | None],
            encodings: Sequence[str | None]) -> Verdict | Exception | None:
    """One verdict for a text from the verdicts on it and on its decodings: unsafe if any is;
    else no output if any has none (None, or the Exception that kept it: the engine retries
    it unless no retry can help); else invalid if any is; else safe.
    p_unsafe is the largest given; raw records each decoding's verdict."""
    if len(verdicts) == 1:
        return verdicts[0]
    labels = [v.label if isinstance(v, Verdict) else None for v in verdicts]
    label: VerdictLabel
    if "unsafe" in labels:
        label = "unsafe"
    elif None in labels:
        return next(v for v in verdicts if not isinstance(v, Verdict))
    else:
        label = "invalid" if "invalid" in labels else "safe"
    scores = [v.p_unsafe for v in verdicts if isinstance(v, Verdict) and v.p_unsafe is not None]
    first = verdicts[0]
    raw = json.dumps({"raw": first.raw if isinstance(first, Verdict) else None, "decoded": [
        {"encoding": e, "verdict": v.label, "p_unsafe": v.p_unsafe, "raw": v.raw}
        for e, v in zip(encodings[1:], verdicts[1:], strict=True) if isinstance(v, Verdict)]}, ensure_ascii=False)
    return Verdict(label, max(scores) if scores and label != "invalid" else None, raw)


def _case_texts(case: Exchange, how: str) -> list[tuple[str | None, Any]]:
    *before, last = case.messages
    return [(encoding, case._replace(messages=(*before, last._replace(content=text))))
            for encoding, text in guard_texts(case.text, how)]


class NormalizingGuard(Guard):
    def __init__(self, inner: Guard, how: str) -> None:
        self.how = canonical(how)  # refuses an unknown defence now, not at the first call
        self.inner = inner
        self.max_batch_size = inner.max_batch_size
        self.remote = inner.remote
        self.texts_per_request = inner.texts_per_request
        self.shapes = inner.shapes  # a whole case is cleaned at its target turn
        self._info = normalized_info(inner.info, self.how)

    @property
    def info(self) -> GuardInfo:
        return self._info

    def classify(self, texts: Sequence[str]) -> list[Verdict | Exception | None]:
        fanned, unique = self._fan_out(texts)
        size = max(self.inner.max_batch_size, 1)  # decodings can outgrow the inner guard's batch
        answers: list[Verdict | Exception | None] = []
        for start in range(0, len(unique), size):
            answers.extend(self.inner.classify(unique[start:start + size]))
        return self._join(fanned, dict(zip(unique, answers, strict=True)))

    def _fan_out(self, texts: Sequence[str]) -> tuple[list[list[tuple[str | None, str]]], list[str]]:
        """Each text's guard texts, and the distinct ones to ask (texts that clean up alike once).
        A whole case (`Exchange`) is cleaned at its target turn, the one a transform edits: the
        other turns go to the guard as they are."""
        fanned = [guard_texts(t, self.how) if isinstance(t, str) else _case_texts(t, self.how) for t in texts]
        return fanned, list(dict.fromkeys(item for texts_of in fanned for _, item in texts_of))

    @staticmethod
    def _join(fanned: list[list[tuple[str | None, str]]],
              verdicts: Mapping[str, Verdict | Exception | None]) -> list[Verdict | Exception | None]:
        return [combine([verdicts[item] for _, item in texts_of], [e for e, _ in texts_of]) for texts_of in fanned]

    async def aclassify(self, texts: Sequence[str]) -> list[Verdict]:
        fanned, unique = self._fan_out(texts)
        answers: dict[str, Verdict | None] = dict(zip(unique, await self.inner.aclassify(unique), strict=True))
        return [v for v in self._join(fanned, answers) if isinstance(v, Verdict)]  # every inner text answered

    def close(self) -> None:
        self.inner.close()

    async def aclose(self) -> None:
        await self.inner.aclose()
