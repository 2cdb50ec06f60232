"""Options several commands share, each spelled and explained once. The engine's take their
flag and help from `margin.engine.settings` (and a command its default: `= settings.X.flag_default`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from margin.engine import settings
from margin.engine.settings import Setting


def flag(setting: Setting) -> Any:
    assert setting.flag is not None, f"{setting.name} has no flag"
    return typer.Option(setting.flag, help=setting.cli_help())


Guard = Annotated[str, typer.Option(help="a preset (margin guards list) | keyword | minilm | "
                                         "python:FILE.py:Class | a guard file (.yaml)")]
Dataset = Annotated[str, typer.Option(help="sample | xstest | PATH (.csv, .jsonl, .parquet)")]
Suite = Annotated[str, typer.Option(help="standard | quick | PATH to a suite YAML")]
Budget = Annotated[float, typer.Option(help="largest tested cost B")]
Seed = Annotated[int, typer.Option(help="seed for every transform")]
TargetTurn = Annotated[str, typer.Option("--target", help="which turn of each case is judged and transformed: "
                                          "prompt (the last user turn) | response (the last assistant turn)")]
Limit = Annotated[int | None, typer.Option(help="a stratified sample of N prompts: both labels in the dataset's proportions, "
                                                     "drawn with --seed (costs keep the dataset's unit)")]
CostNorm = Annotated[str, typer.Option(help="corpus | prompt")]
BatchSize = Annotated[int, flag(settings.BATCH_SIZE)]
Backend = Annotated[str | None, typer.Option(help="transformers | vllm | openai (the preset's default)")]
Model = Annotated[str | None, typer.Option(help="checkpoint or served model name; REPO@COMMIT pins")]
BaseUrl = Annotated[str | None, typer.Option(help="OpenAI-compatible server URL (--backend openai)")]
ApiKeyEnv = Annotated[str | None, typer.Option(help="NAME of the env var holding the API key")]
Threshold = Annotated[float | None, typer.Option(help="unsafe when p_unsafe >= this (default 0.5)")]
Engine = Annotated[str, flag(settings.ENGINE)]
RayAddress = Annotated[str | None, typer.Option(
    help="run on this Ray cluster: auto | HOST:PORT | ray://HOST:PORT (default: $RAY_ADDRESS, else a local Ray)")]
Replicas = Annotated[int | None, typer.Option(help="guard actors (data parallelism)")]
NumCpus = Annotated[float | None, typer.Option(help="CPUs per guard actor")]
NumGpus = Annotated[float | None, typer.Option(help="GPUs per guard actor")]
NoCache = Annotated[bool, typer.Option("--no-cache", help="neither read nor write the verdict cache")]
MaxMissing = Annotated[str, flag(settings.MAX_MISSING)]
MaxAttempts = Annotated[int | None, flag(settings.MAX_ATTEMPTS)]
CallTimeout = Annotated[float | None, flag(settings.CALL_TIMEOUT)]
MaxConcurrency = Annotated[int | None, flag(settings.MAX_CONCURRENCY)]
RequestsPerSecond = Annotated[float | None, flag(settings.REQUESTS_PER_SECOND)]
HedgeAfter = Annotated[str | None, flag(settings.HEDGE_AFTER)]
MaxOutage = Annotated[str | None, flag(settings.MAX_OUTAGE)]
Drivers = Annotated[int, flag(settings.DRIVERS)]
DriverCpus = Annotated[float, flag(settings.DRIVER_CPUS)]
OutDir = Annotated[Path | None, typer.Option(help="output folder (default under runs/)")]
AsJson = Annotated[bool, typer.Option("--json", help="machine-readable")]
