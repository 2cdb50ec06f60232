"""Find encoded text inside a text and decode it: what the `decode` defence classifies too.

`decodings(text)` returns, in a fixed order, every decoded text found:

- the text with smuggled characters made visible: Unicode tag characters back to the ASCII
  they mirror ("ASCII smuggling"), runs of variation selectors read as the UTF-8 bytes they
  carry ("emoji smuggling");
- payloads inside the text: runs of base64 (standard or URL-safe alphabet), base32, hex
  (optionally space- or colon-separated) and 8-bit binary groups that decode to UTF-8 text;
- the whole text decoded: percent-encoding (`%6B%69`) and HTML character references
  (`&#107;`), when it holds at least three of them; ROT13 and reversal, when decoding
  turns at least two of its uncommon words, and at least half of them, into common English
  words (the encoded part becomes readable; a frame around it is garbled, which costs
  nothing since the text itself is classified too).

A payload counts only when its decoded bytes are UTF-8, every character printable (or a
space, tab or line break), with at least one letter: random bytes almost never are, so a
long word that happens to use the base64 alphabet is left alone. Common English words
are wordfreq's most frequent `VOCABULARY` (a frozen data release, recorded in the defence's
identity). At most `MAX_DECODINGS` texts come back, so a text costs a bounded number of
guard calls. Pure and deterministic; never raises.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import html
import re
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version

VOCABULARY = 30_000
MAX_DECODINGS = 8
MIN_WORDS = 2  # words a ROT13 or reversal decoding must make readable

_B64 = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")
_B32 = re.compile(r"[A-Z2-7]{16,}={0,6}")
_HEX = re.compile(r"(?:[0-9A-Fa-f]{2}[ :]?){8,}")
_BINARY = re.compile(r"(?:[01]{8} ?){4,}")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_ENTITY = re.compile(r"&(?:#[0-9]+|#[xX][0-9A-Fa-f]+|[A-Za-z]+);")
_WORD = re.compile(r"[^\W\d_]+")
TAG_BASE = 0xE0000
_TAG = re.compile("[\U000E0001\U000E0020-\U000E007F]+")
_SELECTORS = re.compile("[\uFE00-\uFE0F\U000E0100-\U000E01EF]+")
_BLANKS = frozenset(" \t\r\n")


@dataclass(frozen=True, slots=True)
class Decoded:
    encoding: str
    text: str


@functools.cache
def common_words() -> frozenset[str]:
    from wordfreq import top_n_list

    return frozenset(top_n_list("en", VOCABULARY))


def data_version() -> str:
    return f"wordfreq {version('wordfreq')} top {VOCABULARY}"


def is_text(decoded: str) -> bool:
    return (bool(decoded) and any(ch.isalpha() for ch in decoded)
            and all(ch.isprintable() or ch in _BLANKS for ch in decoded))


def _utf8(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if is_text(text) else None


def _base64(run: str) -> str | None:
    body = run.rstrip("=")
    if len(run) % 4 and len(body) % 4 == 1:
        return None  # no base64 text has this length
    if not any(ch.isupper() for ch in body) or not any(ch.islower() or ch.isdigit() for ch in body):
        return None  # base64 of text mixes cases; one-case words are words
    if "-" in body or "_" in body:
        if "+" in body or "/" in body:
            return None  # two alphabets at once
        body = body.replace("-", "+").replace("_", "/")
    try:
        return _utf8(base64.b64decode(body + "=" * (-len(body) % 4), validate=True))
    except (binascii.Error, ValueError):
        return None


def _base32(run: str) -> str | None:
    if len(run) % 8:
        return None
    try:
        return _utf8(base64.b32decode(run))
    except (binascii.Error, ValueError):
        return None


def _hex(run: str) -> str | None:
    digits = re.sub(r"[ :]", "", run)
    if not any(ch.isdigit() for ch in digits) or not any(ch.isalpha() for ch in digits):
        return None  # hex of text mixes digits and a-f
    try:
        return _utf8(bytes.fromhex(digits))
    except ValueError:
        return None


def _binary(run: str) -> str | None:
    bits = run.replace(" ", "")
    return _utf8(bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)))


PAYLOADS = (("base64", _B64, _base64), ("base32", _B32, _base32), ("hex", _HEX, _hex),
            ("binary", _BINARY, _binary))


def _payloads(text: str) -> list[Decoded]:
    found = []
    for name, pattern, decode in PAYLOADS:
        for match in pattern.finditer(text):
            decoded = decode(match.group().strip(" :"))
            if decoded is not None:
                found.append(Decoded(name, decoded))
    return found


def _unescape_percent(text: str) -> str | None:
    try:
        return urllib.parse.unquote(text, errors="strict")
    except UnicodeDecodeError:
        return None


ESCAPES = (("percent", _PERCENT, _unescape_percent), ("html", _ENTITY, html.unescape))


def _escapes(text: str) -> list[Decoded]:
    found = []
    for name, pattern, decode in ESCAPES:
        if len(pattern.findall(text)) >= 3:
            decoded = decode(text)
            if decoded is not None and is_text(decoded):
                found.append(Decoded(name, decoded))
    return found


def _tag_text(text: str) -> str | None:
    """Unicode tag characters (U+E0020..E007E, "ASCII smuggling") back to their ASCII twins;
    the language and cancel tags go."""
    if not _TAG.search(text):
        return None
    return _TAG.sub(lambda m: "".join(chr(ord(ch) - TAG_BASE) if ord(ch) - TAG_BASE in range(0x20, 0x7F) else ""
                                      for ch in m.group()), text)


def _selector_byte(ch: str) -> int:
    cp = ord(ch)
    return cp - 0xFE00 if cp < 0xE0100 else cp - 0xE0100 + 16


def _selector_text(text: str) -> str | None:
    """Runs of variation selectors read as the UTF-8 bytes they carry ("emoji smuggling");
    a run that is not UTF-8 text (an emoji's own presentation selector) stays as it is."""
    changed = False

    def decode(match: re.Match[str]) -> str:
        nonlocal changed
        decoded = _utf8_any(bytes(_selector_byte(ch) for ch in match.group()))
        if decoded is None:
            return match.group()
        changed = True
        return decoded

    out = _SELECTORS.sub(decode, text)
    return out if changed else None


def _utf8_any(data: bytes) -> str | None:
    """UTF-8 that is printable (a fragment of a text need not hold a letter)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if all(ch.isprintable() or ch in _BLANKS for ch in text) else None


SMUGGLED = (("tags", _tag_text), ("variation-selectors", _selector_text))


def _smuggled(text: str) -> list[Decoded]:
    found = []
    for name, decode in SMUGGLED:
        decoded = decode(text)
        if decoded is not None and decoded != text:
            found.append(Decoded(name, decoded))
    return found


def readable(words: list[str], decode: Callable[[str], str]) -> bool:
    """Whether decoding word by word makes at least MIN_WORDS uncommon words common, and
    at least half of the uncommon ones: the encoded part turns readable, while ordinary
    text (whose few uncommon words are names and typos) never does."""
    common = common_words()
    uncommon = [w for w in (w.casefold() for w in words) if w not in common]
    gained = sum(decode(w) in common for w in uncommon)
    return gained >= MIN_WORDS and 2 * gained >= len(uncommon)


def _rot13(text: str) -> str:
    return codecs.encode(text, "rot13")


def _reverse(text: str) -> str:
    return text[::-1]


WHOLE = (("rot13", _rot13), ("reversal", _reverse))


def _whole(text: str) -> list[Decoded]:
    words = _WORD.findall(text)
    return [Decoded(name, decode(text)) for name, decode in WHOLE if readable(words, decode)]


def decodings(text: str) -> list[Decoded]:
    """Every decoded text found in `text` (none equal to it or to each other), at most
    MAX_DECODINGS: smuggled characters, payloads, escapes, then whole-text decodings."""
    out: list[Decoded] = []
    seen = {text}
    for item in (*_smuggled(text), *_payloads(text), *_escapes(text), *_whole(text)):
        if item.text not in seen:
            seen.add(item.text)
            out.append(item)
        if len(out) == MAX_DECODINGS:
            break
    return out
