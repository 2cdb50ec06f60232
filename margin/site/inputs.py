"""What a site is built from: the snapshots `margin publish` wrote into one folder.

A snapshot is `margin-KIND-DATE-HASH16.json` (KIND `guardrails` or `pairings`), where HASH
is the SHA-256 of its canonical JSON with `meta.snapshot_url` set to null, so a file whose
content does not match its name is refused. `guardrails.json` / `pairings.json`, the latest
copies publish also writes, count as snapshots under the name their content gives them.

Per kind the newest date is current and every other snapshot is an archive. Two snapshots
of the newest date are resolved by the latest copy (publish wrote it last); of different
protocols, or with no latest copy naming one, they are an error: which is current is then
not a choice to make silently.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.reports.documents import Document
from margin.reports.pairings import PROTOCOL as PAIRINGS_PROTOCOL
from margin.reports.pairings import Pairings, validate_pairings
from margin.reports.publish import address, content_hash
from margin.reports.snapshot_schema import Snapshot, validate_snapshot

KINDS = ("guardrails", "pairings")
NAME = re.compile(r"margin-(?P<kind>guardrails|pairings)-(?P<date>\d{4}-\d{2}-\d{2})-(?P<hash>[0-9a-f]{16})\.json")


def _validate_pairings(snapshot: Any, where: Path) -> Pairings:
    pairings = validate_pairings(snapshot, where)
    if pairings.meta.protocol != PAIRINGS_PROTOCOL:
        raise InputError(f"unknown protocol {pairings.meta.protocol!r}; this margin reads {PAIRINGS_PROTOCOL}",
                         path=where, field="meta.protocol")
    return pairings


VALIDATORS: dict[str, Callable[[Any, Path], Document]] = {
    "guardrails": validate_snapshot,
    "pairings": _validate_pairings,
}


@dataclass(frozen=True)
class PublishedFile:
    kind: str
    name: str  # the immutable file name, margin-KIND-DATE-HASH16.json
    text: str  # the file as published, copied byte for byte
    source: Path
    model: Document  # the same, read into its model and checked: what the pages read

    @property
    def snapshot(self) -> Snapshot:
        """The leaderboard snapshot a `guardrails` file holds."""
        if not isinstance(self.model, Snapshot):
            raise TypeError(f"{self.name} is a {self.kind} snapshot, not a leaderboard")
        return self.model

    @property
    def pairings(self) -> Pairings:
        """The pairings snapshot a `pairings` file holds."""
        if not isinstance(self.model, Pairings):
            raise TypeError(f"{self.name} is a {self.kind} snapshot, not pairings")
        return self.model

    @property
    def date(self) -> str:
        return str(self.model.meta.snapshot_date)

    @property
    def protocol(self) -> str:
        return str(self.model.meta.protocol)

    @property
    def stem(self) -> str:
        return self.name.removesuffix(".json")


@dataclass(frozen=True)
class SiteInputs:
    """Per kind, its snapshots: the current one first, then the archives, newest first."""

    folder: Path
    snapshots: dict[str, list[PublishedFile]]

    def current(self, kind: str) -> PublishedFile | None:
        found = self.snapshots.get(kind) or []
        return found[0] if found else None

    def archives(self, kind: str) -> list[PublishedFile]:
        return (self.snapshots.get(kind) or [])[1:]

    def all(self) -> list[PublishedFile]:
        return [s for kind in KINDS for s in self.snapshots.get(kind, [])]


def read_snapshot(path: Path, kind: str) -> PublishedFile:
    """One snapshot file, parsed and checked; a dated name must match its date and content hash."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read ({exc})", path=path) from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON ({exc.msg})", path=path, line=exc.lineno) from None
    if not isinstance(body, dict):
        raise InputError("a snapshot is a JSON object with meta and data", path=path)
    model = VALIDATORS[kind](body, path)
    # The name and the hash check read the JSON as published: its content is what the name pins.
    name = address(body, kind, None)[0]
    match = NAME.fullmatch(path.name)
    if match:
        if match["date"] != str(model.meta.snapshot_date):
            raise InputError(f"named for {match['date']} but meta.snapshot_date is {model.meta.snapshot_date}",
                             path=path, field="meta.snapshot_date")
        if match["hash"] != content_hash(body)[:16]:
            raise InputError("content does not match the hash in its name (published snapshots are immutable; "
                             "publish again rather than editing one)", path=path)
    return PublishedFile(kind, name, text, path, model)


def _current_first(kind: str, found: dict[str, PublishedFile], latest: str | None) -> list[PublishedFile]:
    ordered = sorted(found.values(), key=lambda s: (s.date, s.name), reverse=True)
    newest = [s for s in ordered if s.date == ordered[0].date]
    protocols = {s.protocol for s in newest}
    if len(protocols) > 1:
        listing = "; ".join(f"{s.source} ({s.protocol})" for s in newest)
        raise InputError(f"snapshots of different protocols are all current (dated {newest[0].date}): {listing}; "
                         "margins of different protocols are never shown as one leaderboard", path=newest[0].source)
    if len(newest) > 1:
        chosen = next((s for s in newest if s.name == latest), None)
        if chosen is None:
            listing = ", ".join(str(s.source) for s in newest)
            raise InputError(f"{len(newest)} {kind} snapshots dated {newest[0].date} and no {kind}.json naming "
                             f"one of them, so none is current: {listing}", path=newest[0].source)
        ordered.remove(chosen)
        ordered.insert(0, chosen)
    return ordered


def load_publish_dir(folder: Path) -> SiteInputs:
    """Every snapshot in `folder`, validated; InputError naming the file on the first problem."""
    if not folder.is_dir():
        raise InputError("not a folder (expected what margin publish --out wrote)", path=folder)
    snapshots: dict[str, list[PublishedFile]] = {}
    for kind in KINDS:
        found: dict[str, PublishedFile] = {}
        for path in sorted(folder.glob(f"margin-{kind}-*.json")):
            if not NAME.fullmatch(path.name):
                raise InputError(f"named like a snapshot but not margin-{kind}-YYYY-MM-DD-HASH16.json", path=path)
            snap = read_snapshot(path, kind)
            found[snap.name] = snap
        latest = None
        if (folder / f"{kind}.json").is_file():
            copy = read_snapshot(folder / f"{kind}.json", kind)
            latest = copy.name
            found.setdefault(copy.name, copy)  # a dated file of the same content wins: it is the immutable one
        if found:
            snapshots[kind] = _current_first(kind, found, latest)
    if not snapshots:
        raise InputError("no snapshot here: expected margin-guardrails-DATE-HASH.json or "
                         "margin-pairings-DATE-HASH.json (what margin publish writes)", path=folder)
    return SiteInputs(folder, snapshots)
