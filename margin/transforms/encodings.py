"""Pure text encodings that wrappers apply to the prompt before framing it.

`ENCODERS` names them for wrapper data files (`encoding: base64`).
"""

from __future__ import annotations

import base64
import codecs
import json

from margin.transforms.base import Encoder


def reverse(text: str) -> str:
    """Code points in reverse order."""
    return text[::-1]


def rot13(text: str) -> str:
    """ROT13 of the ASCII letters; every other character is kept."""
    return codecs.encode(text, "rot13")


def base64_utf8(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def json_string(text: str) -> str:
    """The body of a JSON string literal (quotes, backslashes and controls escaped)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def quote_lines(text: str) -> str:
    """Continues a markdown block quote over every line of the prompt."""
    return text.replace("\r\n", "\n").replace("\n", "\n> ")


ENCODERS: dict[str, Encoder] = {
    "reverse": reverse,
    "rot13": rot13,
    "base64": base64_utf8,
    "json-string": json_string,
    "quote-lines": quote_lines,
}
