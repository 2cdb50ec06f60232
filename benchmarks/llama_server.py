"""Benchmark (issue 31, item 8): margin's guard calls/s through llama.cpp's llama-server
against a plain client sending the same requests at the same concurrency and max_tokens.

    python -m benchmarks.llama_server --base-url http://127.0.0.1:8090/v1 \\
        --guard studies/smollm2-guard.yaml [--limit 4] [--rounds 2]

The concurrency is the server's own limit, `total_slots` from llama.cpp's `/props` (else
`--concurrency`). Each round runs the plain client, then margin (`margin run` with exhaustive
search, no cache, the engine's stream of requests), on texts of its own: the dataset's
prompts tagged with the round and the side, so no server-side prompt cache favours a side.
The plain client sends, per text, the body margin sends (`OpenAIChatBackend`: the guard's
messages, temperature 0, max_tokens, top logprobs and request_options) through one
`httpx.AsyncClient`. Goal: margin >= 0.9 of the plain client's calls/s.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from margin.backends.served import root_url
from margin.datasets import load_dataset
from margin.guards.make import build_guard, parse_guard_spec
from margin.guards.served_spec import served_spec
from margin.runs.executing.execute import execute
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import prepare
from margin.search.candidates import original_candidate


def slots(base_url: str, given: int | None) -> int:
    import httpx

    if given:
        return given
    props = httpx.get(root_url(base_url) + "/props", timeout=30).json()
    return int(props.get("total_slots") or 1)


def tagged_dataset(folder: Path, tag: str) -> Path:
    """margin's sample with every prompt tagged: texts no earlier round sent."""
    path = folder / f"{tag}.csv"
    dataset = load_dataset("sample")
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "prompt", "type", "label"])
        for p in dataset.prompts:
            writer.writerow([p.id, f"{p.text} [{tag}]", p.type, p.label])
    return path


def config(spec: Any, dataset: Path, args: argparse.Namespace, concurrency: int) -> RunConfig:
    spec = spec.model_copy(update={"backend_options": {**spec.backend_options, "max_concurrency": concurrency}})
    return RunConfig.of(guard=spec, dataset=str(dataset), suite=args.suite, search="exhaustive", cache=False,
                     limit=args.limit, engine="local")


def texts_of(run_config: RunConfig) -> list[str]:
    """Every text an exhaustive run sends: originals and candidates, each once."""
    prepared = prepare(run_config)
    texts = []
    for prompt in prepared.prompts:
        texts.append(original_candidate(prompt, run_config.seed).text)
        texts.extend(c.text for c in prepared.all_candidates(prompt))
    return list(dict.fromkeys(texts))


async def plain(spec: Any, texts: list[str], concurrency: int) -> float:
    """Calls/s of a plain client sending margin's request bodies, `concurrency` in flight."""
    import httpx

    guard = build_guard(spec)
    backend: Any = guard.backend  # type: ignore[attr-defined]
    adapter: Any = guard.adapter  # type: ignore[attr-defined]
    bodies = []
    for text in texts:
        (request,) = adapter.requests(text)
        bodies.append({"model": backend.model, "messages": list(request.messages), "temperature": 0,
                       "max_tokens": request.max_new_tokens, "logprobs": True,
                       "top_logprobs": backend.top_logprobs, **backend.extra_body})
    gate = asyncio.Semaphore(concurrency)
    url = spec.base_url.rstrip("/") + "/chat/completions"
    async with httpx.AsyncClient(timeout=600, limits=httpx.Limits(max_connections=concurrency)) as client:

        async def one(body: dict[str, Any]) -> None:
            async with gate:
                response = await client.post(url, json=body)
                response.raise_for_status()

        start = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        return len(bodies) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--guard", default="studies/smollm2-guard.yaml")
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--limit", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=None, help="default: /props total_slots")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    spec = served_spec(parse_guard_spec(args.guard, base_url=args.base_url))
    concurrency = slots(args.base_url, args.concurrency)
    rates: dict[str, list[float]] = {"plain": [], "margin": []}
    calls = 0
    with tempfile.TemporaryDirectory() as work:
        folder = Path(work)
        for r in range(args.rounds):
            texts = texts_of(config(spec, tagged_dataset(folder, f"plain-{r}"), args, concurrency))
            rates["plain"].append(asyncio.run(plain(spec, texts, concurrency)))
            run_config = config(spec, tagged_dataset(folder, f"margin-{r}"), args, concurrency)
            outcome = execute(prepare(run_config), folder / f"margin-{r}")
            calls = outcome.guard_calls
            rates["margin"].append(outcome.guard_calls / outcome.figures.search_s)
            print(f"round {r}: plain {rates['plain'][-1]:.2f} calls/s ({len(texts)} texts), "
                  f"margin {rates['margin'][-1]:.2f} calls/s ({calls} calls)", flush=True)
    figures = {"concurrency": concurrency, "texts_per_round": calls, "rounds": args.rounds,
               "plain_calls_per_s": statistics.median(rates["plain"]),
               "margin_calls_per_s": statistics.median(rates["margin"]), "every_round": rates}
    figures["margin_over_plain"] = figures["margin_calls_per_s"] / figures["plain_calls_per_s"]
    print(f"concurrency {concurrency} (the server's slots): margin {figures['margin_calls_per_s']:.2f} calls/s, "
          f"plain client {figures['plain_calls_per_s']:.2f} calls/s, ratio {figures['margin_over_plain']:.3f} "
          "(goal >= 0.9)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
