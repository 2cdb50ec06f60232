"""`margin site`: the leaderboard site from published snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from margin.cli.app import app, console
from margin.errors import InputError


@app.command()
def site(
    publish_dir: Annotated[Path, typer.Argument(help="the folder margin publish --out wrote")],
    out: Annotated[Path, typer.Option(help="folder for the static site (replaced whole if margin built it)")],
    base_url: Annotated[str | None, typer.Option(help="where the site will live (https://...): the API's "
                                                      "meta.snapshot_url points under it")] = None,
    serve: Annotated[bool, typer.Option("--serve", help="then serve it on 127.0.0.1 until Ctrl-C")] = False,
    port: Annotated[int, typer.Option(help="port for --serve (0: any free port)")] = 8000,
) -> None:
    """The leaderboard site: pages, the JSON API and the immutable snapshots, as a static folder."""
    from margin.site.build import check_base_url, check_out_dir, site_files, write_site
    from margin.site.inputs import load_publish_dir

    base = check_base_url(base_url)
    inputs = load_publish_dir(publish_dir)
    check_out_dir(out)
    server = None
    if serve:
        from margin.site.serve import make_server

        try:
            server = make_server(out, port)
        except OSError as exc:
            raise InputError(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc})", field="--port") from None
        base = base or f"http://127.0.0.1:{server.server_port}"
    files = site_files(inputs, base)
    write_site(out, files)
    for kind, snaps in inputs.snapshots.items():
        console.print(f"{kind}: current {snaps[0].name}" + (f", {len(snaps) - 1} archived" if len(snaps) > 1 else ""))
    pages = [name for name in ("index.html", "pairings.html", "methodology.html", "archive.html") if name in files]
    endpoints = [path for path in files if path.startswith("api/") and not path.endswith(".json")]
    console.print(f"wrote {out}/ ({len(files)} files: {', '.join(pages + endpoints)})", soft_wrap=True)
    if server is not None:
        print(f"serving http://127.0.0.1:{server.server_port}/ (Ctrl-C to stop)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
