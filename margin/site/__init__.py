"""The leaderboard site: static pages and the JSON API built from published snapshots.

`inputs` reads and checks a publish folder; `svg` draws curves and the capability ladder;
`pages` renders the HTML (templates/ and assets/ beside it); `build` writes the folder;
`serve` previews it on 127.0.0.1.
"""
