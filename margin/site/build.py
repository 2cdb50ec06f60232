"""`margin site`: a static folder from the snapshots `margin publish` wrote.

    index.html, pairings.html          the current leaderboard and pairings
    methodology.html, archive.html     generated from the snapshots' meta; every snapshot listed
    margin-KIND-DATE-HASH.json         the immutable snapshots, byte for byte
    margin-KIND-DATE-HASH.html         each snapshot's permanent page
    api/v1/margin/guardrails|pairings  the current snapshots as the API serves them (also *.json)
    assets/site.css, site.js           everything the pages load: no CDN, no network

The endpoints hold the snapshot unchanged except `meta.snapshot_url`, which points at the
immutable file: `--base-url` + name, or without it the relative reference from the
endpoint to the file. Everything is rendered in memory first and the folder is swapped in
whole, so bad input writes nothing and a reader never sees half a site.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from urllib.parse import urlsplit

from margin.backends.secrets import published_url
from margin.errors import InputError
from margin.runfolder import dumps
from margin.site.inputs import PublishedFile, SiteInputs, load_publish_dir
from margin.site.pages import API, Pages
from margin.util.safefiles import inside

MARKER = ".margin-site"  # a folder holding it was built here and may be replaced by the next build
ASSETS = ("site.css", "site.js")


def check_base_url(base_url: str | None) -> str | None:
    if base_url is None:
        return None
    published_url(base_url, "--base-url")  # first, so the message below never shows a credential
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise InputError(f"expected an absolute http(s) URL such as https://example.org/margin, got {base_url!r}",
                         field="--base-url")
    return base_url.rstrip("/")


def snapshot_url(name: str, base_url: str | None, endpoint: str) -> str:
    """Where the immutable file lives: under the base URL, or relative to the endpoint's own path."""
    if base_url:
        return f"{base_url}/{name}"
    return "../" * endpoint.count("/") + name


def endpoint_text(snap: PublishedFile, url: str) -> str:
    """The snapshot as published with only meta.snapshot_url replaced: the file's own JSON
    (key order and number types kept whatever wrote it), read here where it is written."""
    body = json.loads(snap.text)
    return dumps({**body, "meta": {**body["meta"], "snapshot_url": url}}) + "\n"


def site_files(inputs: SiteInputs, base_url: str | None) -> dict[str, str]:
    """Every file of the site, path -> text, rendered from the snapshots."""
    pages = Pages(inputs)
    assets = resources.files("margin.site") / "assets"
    files = {f"assets/{name}": (assets / name).read_text(encoding="utf-8") for name in ASSETS}
    for snap in inputs.all():
        files[snap.name] = snap.text
        render = pages.leaderboard if snap.kind == "guardrails" else pages.pairings
        files[f"{snap.stem}.html"] = render(snap, page="permanent")
    leaderboard, pairings = inputs.current("guardrails"), inputs.current("pairings")
    if pairings:
        files["pairings.html"] = pages.pairings(pairings)
    files["index.html"] = pages.leaderboard(leaderboard) if leaderboard else files["pairings.html"]
    for kind, path in API.items():
        current = inputs.current(kind)
        if current:
            text = endpoint_text(current, snapshot_url(current.name, base_url, path))
            files[path] = text
            files[f"{path}.json"] = text  # for static hosts that choose the content type by extension
    files["methodology.html"] = pages.methodology()
    files["archive.html"] = pages.archive()
    files[MARKER] = "built by `margin site`; the next build replaces this whole folder\n"
    return files


def check_out_dir(out: Path) -> None:
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise InputError("exists and is not a folder margin site built; refusing to replace it "
                         "(choose a new or empty folder)", path=out)


def write_site(out: Path, files: dict[str, str]) -> None:
    """Write the whole site beside `out`, then swap it in."""
    check_out_dir(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    old = None
    try:
        for rel, text in files.items():
            try:
                path = inside(tmp, rel)  # every name was checked on reading; this is the last line of defence
            except ValueError as exc:
                raise InputError(f"refusing to write {rel!r}: {exc}", path=out) from None
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
        for folder, _, _ in os.walk(tmp):
            os.chmod(folder, 0o755)  # mkdtemp's 0700 would hide the site from a web server's user
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            out.replace(old / "site")
        tmp.replace(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and not out.exists():
            (old / "site").replace(out)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


def build_site(publish_dir: Path, out: Path, base_url: str | None = None) -> tuple[SiteInputs, dict[str, str]]:
    """Read and check every snapshot, render every page, then write; returns what it wrote."""
    base = check_base_url(base_url)
    inputs = load_publish_dir(publish_dir)
    check_out_dir(out)
    files = site_files(inputs, base)
    write_site(out, files)
    return inputs, files
