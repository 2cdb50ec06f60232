"""How a peer attack asks margin's benchmark for the guard's p_unsafe (POST URL/p_unsafe
{"texts": [...]} -> {"p_unsafe": [...]}). Standard library only: the peer halves that import it
run in environments of their own and import nothing of margin."""

from __future__ import annotations

import json
import urllib.request


def guard_scores(url: str, texts: list[str]) -> list[float]:
    """The guard's p_unsafe for each text; a text it gave no output for stops the attack."""
    body = json.dumps({"texts": texts}).encode("utf-8")
    request = urllib.request.Request(f"{url}/p_unsafe", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        answer = json.loads(response.read())["p_unsafe"]
    if any(p is None for p in answer):
        raise RuntimeError("the guard gave no output for a text")
    return [float(p) for p in answer]
