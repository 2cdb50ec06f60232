"""One GGUF file, two runtimes: a guard's verdicts through llama.cpp's server and through
transformers (the file dequantized), on the same prompts.

    python scripts/gguf_agreement.py SERVED.yaml LOCAL.yaml [--dataset sample] [--limit N] [--json FILE]

SERVED.yaml is a guard file on `backend: openai` whose server runs the GGUF file
(`llama-server -m FILE.gguf`); LOCAL.yaml the same guard with `model: FILE.gguf` on
transformers. Prints how often the two verdicts agree (`invalid` counted as a verdict), how
often the two replies are the same text (an end-of-turn token aside), each side's verdict
counts and the time each took. docs/guards.md reports what it printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections import Counter

from margin.datasets import load_dataset
from margin.guards.make import build_guard, parse_guard
from margin.runs.preparing.subset import limit_prompts

END = ("<|im_end|>", "<|endoftext|>", "</s>", "<|eot_id|>")


def reply(raw: str | None) -> str:
    text = (raw or "").strip()
    for end in END:
        text = text.removesuffix(end)
    return text.strip()


async def served(guard, texts):  # type: ignore[no-untyped-def]
    # A few at a time, as the server's slots allow.
    gate = asyncio.Semaphore(2)

    async def one(text: str):  # type: ignore[no-untyped-def]
        async with gate:
            return (await guard.aclassify([text]))[0]

    try:
        return await asyncio.gather(*(one(t) for t in texts))
    finally:
        await guard.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("served")
    parser.add_argument("local")
    parser.add_argument("--dataset", default="sample")
    parser.add_argument("--limit", type=int)
    parser.add_argument("--json")
    args = parser.parse_args()
    prompts = limit_prompts(load_dataset(args.dataset).prompts, args.limit, 0)
    texts = [p.text for p in prompts]
    start = time.monotonic()
    remote = asyncio.run(served(build_guard(parse_guard(args.served, {})), texts))
    remote_s = time.monotonic() - start
    start = time.monotonic()
    local_guard = build_guard(parse_guard(args.local, {}))
    loaded_s = time.monotonic() - start
    local = local_guard.classify(texts)
    local_s = time.monotonic() - start - loaded_s
    rows = [{"id": p.id, "label": p.label, "served": a.label, "local": b.label,
             "served_reply": reply(a.raw), "local_reply": reply(b.raw),
             "served_p": a.p_unsafe, "local_p": b.p_unsafe} for p, a, b in zip(prompts, remote, local, strict=True)]
    same = sum(r["served"] == r["local"] for r in rows)
    text = sum(r["served_reply"] == r["local_reply"] for r in rows)
    print(f"{len(rows)} prompts of {args.dataset}: verdicts agree on {same} ({same / len(rows):.1%}), "
          f"replies identical on {text} ({text / len(rows):.1%})")
    print(f"served: {dict(Counter(r['served'] for r in rows))} in {remote_s:.1f} s; "
          f"transformers: {dict(Counter(r['local'] for r in rows))} in {local_s:.1f} s (+ {loaded_s:.1f} s to load)")
    both = Counter((r["served"], r["local"]) for r in rows)
    print("served x transformers:", {f"{a}/{b}": n for (a, b), n in sorted(both.items())})
    for r in rows:
        if r["served"] != r["local"] or r["served_reply"] != r["local_reply"]:
            print(f"  {r['id']}: served {r['served']} {r['served_reply'][:40]!r} | "
                  f"transformers {r['local']} {r['local_reply'][:40]!r}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=1)


if __name__ == "__main__":
    main()
