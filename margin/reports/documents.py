"""What every report document is made of: `Open`, a part of a document whose declared fields
come in the order the document writes them and whose unknown fields are kept; `Number`, a
finite number kept as it was given; and `Document`, a published document (leaderboard or
pairings snapshot) named by its kind, date and content hash.

A document is read into its model once (`read_model`, one InputError naming the file and the
first bad field) and held as the model; `document()` gives back the JSON object, exactly what
was set (nothing a default filled in), so a file read and written again is the same bytes.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Self

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from margin.errors import InputError
from margin.util.hashing import canonical_json, sha256_text
from margin.util.safefiles import check_date


def _finite(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # "12.5" is not coerced
        raise ValueError(f"Input should be a finite number, not {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError(f"Input should be a finite number, not {value}")
    return value


#: A number as it was given: an int stays an int (a budget of 100 is written `100`, never `100.0`).
Number = Annotated[int | float, BeforeValidator(_finite)]


class Open(BaseModel):
    """A part of a document: the fields it declares, in the order a document writes them, and
    any others kept as they are (documents gain fields; an older reader must not drop them)."""

    model_config = ConfigDict(extra="allow")

    def document(self) -> dict[str, Any]:
        """The JSON object: what was set, nothing a default filled in."""
        return self.model_dump(exclude_unset=True)


def read_model(model: type[Open], document: Any, where: str | Path) -> Any:
    """`document` read into `model`, or one InputError naming the file and the first bad field."""
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise InputError(first["msg"].removeprefix("Value error, "), path=where,
                         field=".".join(str(p) for p in first["loc"])) from None


def content_hash(body: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON with meta.snapshot_url null (the url names the hash)."""
    return sha256_text(canonical_json({**body, "meta": {**body["meta"], "snapshot_url": None}}))


def pinned_url(name: str, base_url: str | None) -> str:
    """Where a published file lives: `base_url`/name, or the bare name without a base."""
    return f"{base_url.rstrip('/')}/{name}" if base_url else name


class Document(Open):
    """A published document: `meta` holds at least `snapshot_date` and `snapshot_url`."""

    KIND: ClassVar[str]  # the file name's kind: guardrails, pairings
    meta: Any

    def content_hash(self) -> str:
        return content_hash(self.document())

    def file_name(self) -> str:
        """`margin-KIND-DATE-HASH16.json`; the date checked again where it becomes a file name."""
        return f"margin-{self.KIND}-{check_date(str(self.meta.snapshot_date))}-{self.content_hash()[:16]}.json"

    def at(self, base_url: str | None) -> Self:
        """The same document pinned to its own file: `meta.snapshot_url` = `base_url`/its name."""
        url = pinned_url(self.file_name(), base_url)
        return self.model_copy(update={"meta": self.meta.model_copy(update={"snapshot_url": url})})
