"""Options several commands share, each spelled and explained once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Guard = Annotated[str, typer.Option(help="a preset (margin guards list) | keyword | minilm | "
                                         "python:FILE.py:Class | a guard file (.yaml)")]
Dataset = Annotated[str, typer.Option(help="sample | xstest | PATH (.csv, .jsonl, .parquet)")]
Suite = Annotated[str, typer.Option(help="standard | quick | PATH to a suite YAML")]
Budget = Annotated[float, typer.Option(help="largest tested cost B")]
Seed = Annotated[int, typer.Option(help="seed for every transform")]
Limit = Annotated[int | None, typer.Option(help="a stratified sample of N prompts: both labels in the dataset's proportions, "
                                                     "drawn with --seed (costs keep the dataset's unit)")]
CostNorm = Annotated[str, typer.Option(help="corpus | prompt")]
BatchSize = Annotated[int, typer.Option(help="texts per guard call (in-process guards)")]
Backend = Annotated[str | None, typer.Option(help="transformers | vllm | openai (the preset's default)")]
Model = Annotated[str | None, typer.Option(help="checkpoint or served model name; REPO@COMMIT pins")]
BaseUrl = Annotated[str | None, typer.Option(help="OpenAI-compatible server URL (--backend openai)")]
ApiKeyEnv = Annotated[str | None, typer.Option(help="NAME of the env var holding the API key")]
Threshold = Annotated[float | None, typer.Option(help="unsafe when p_unsafe >= this (default 0.5)")]
Engine = Annotated[str, typer.Option(help="ray (actors for in-process models) | local (this process, no Ray)")]
RayAddress = Annotated[str | None, typer.Option(
    help="run on this Ray cluster: auto | HOST:PORT | ray://HOST:PORT (default: $RAY_ADDRESS, else a local Ray)")]
Replicas = Annotated[int | None, typer.Option(help="guard actors (data parallelism)")]
NumCpus = Annotated[float | None, typer.Option(help="CPUs per guard actor")]
NumGpus = Annotated[float | None, typer.Option(help="GPUs per guard actor")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="neither read nor write the verdict cache")]
MaxMissing = Annotated[str, typer.Option(help="fail past this share of prompts without a verdict (1% or 0.01)")]
MaxAttempts = Annotated[int | None, typer.Option(
    help="attempts per text before it counts as missing (default: the guard file's, else 3)")]
CallTimeout = Annotated[float | None, typer.Option(
    help="seconds one request may take (endpoints; default 120) or one batch (guards on Ray actors, which are "
         "restarted past it; default 300) before it is an attempt without output; refused for a guard in this "
         "process (--engine local), whose batch cannot be stopped")]
MaxConcurrency = Annotated[int | None, typer.Option(
    help="endpoints: requests in flight at most (default 64; backs off on 429/503)")]
RequestsPerSecond = Annotated[float | None, typer.Option(
    help="endpoints: requests started per second at most (default: no limit)")]
HedgeAfter = Annotated[str | None, typer.Option(
    help="endpoints: a second copy of a request unanswered after this many seconds | auto (3 x p95 latency, "
         "at least 1 s; the default) | off")]
MaxOutage = Annotated[str | None, typer.Option(
    help="endpoints: how long one may answer nothing (down, refusing, throttling every request) before the "
         "run stops, resumable: seconds or 45s / 10m / 1h (default 10m)")]
OutDir = Annotated[Path | None, typer.Option(help="output folder (default under runs/)")]
AsJson = Annotated[bool, typer.Option("--json", help="machine-readable")]
