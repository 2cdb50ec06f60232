"""Options several commands share, each spelled and explained once. The engine's take their
flag, help and default from `margin.engine.settings`; the engine and call-limit flags are one
group (`ENGINE_FLAGS`, `LIMIT_FLAGS`) that `margin run`, `margin ablate` and `margin study`
add with `with_flags` rather than each spelling them as parameters."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

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
Drivers = Annotated[int, flag(settings.DRIVERS)]
DriverCpus = Annotated[float, flag(settings.DRIVER_CPUS)]
OutDir = Annotated[Path | None, typer.Option(help="output folder (default under runs/)")]
AsJson = Annotated[bool, typer.Option("--json", help="machine-readable")]


@dataclass(frozen=True)
class Param:
    """One parameter of a group several commands add: its name, its type (with its flag) and
    its default."""

    name: str
    annotation: Any
    default: Any


def setting_param(setting: Setting, kind: type) -> Param:
    """A setting's flag, typed as the command line gives it (a share, a duration or `auto`
    is parsed after): None by default where a guard file's `backend_options` decide first."""
    assert setting.flag is not None, f"{setting.name} has no flag"
    name = setting.flag.removeprefix("--").replace("-", "_")
    if setting.option is not None:
        return Param(name, Annotated[kind | None, flag(setting)], None)
    return Param(name, Annotated[kind, flag(setting)], setting.flag_default)


#: Which engine calls the guard, and on which Ray: run, ablate and study.
ENGINE_FLAGS: tuple[Param, ...] = (setting_param(settings.ENGINE, str), Param("ray_address", RayAddress, None))
#: How calls are batched and limited, and how much a run may lose: run and ablate.
LIMIT_FLAGS: tuple[Param, ...] = tuple(setting_param(s, kind) for s, kind in (
    (settings.BATCH_SIZE, int), (settings.MAX_MISSING, str), (settings.MAX_ATTEMPTS, int),
    (settings.CALL_TIMEOUT, float), (settings.MAX_CONCURRENCY, int), (settings.REQUESTS_PER_SECOND, float),
    (settings.HEDGE_AFTER, str), (settings.MAX_OUTAGE, str)))

Command = TypeVar("Command", bound=Callable[..., Any])


def with_flags(*params: Param, into: str) -> Callable[[Command], Command]:
    """Add `params` to a command where its parameter `into` stands; the command gets their
    values as one dict there (by parameter name)."""
    def wrap(command: Command) -> Command:
        signature = inspect.signature(command, eval_str=True)
        own = list(signature.parameters.values())
        at = [p.name for p in own].index(into)
        added = [inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=p.annotation, default=p.default)
                 for p in params]
        names = [p.name for p in params]

        @functools.wraps(command)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            kwargs[into] = {name: kwargs.pop(name) for name in names}
            return command(*args, **kwargs)

        parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in [*own[:at], *added, *own[at + 1:]]]
        wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
        return wrapper  # type: ignore[return-value]

    return wrap
