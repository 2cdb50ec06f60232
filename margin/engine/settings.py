"""Every engine and run setting, defined once: its default, CLI flag, YAML keys and doc line.

A setting is how margin makes its calls and how much it may lose, never what decides the
results (dataset, suite, budget, seed: the run's identity). Each consumer takes its name,
default and help from here: the CLI options (`margin.cli.options`: one group of engine and
limit flags that run, ablate and study add), `CallSettings` (which `RunConfig` nests),
`EndpointLimits` (whose `backend_options` keys are the `option` column),
the study config's `runtime:` block, and the table in docs/engine.md and README.md, which
docs/gen_settings.py writes (tests/test_docs_settings.py fails when it is stale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

from margin.errors import InputError


class Case(NamedTuple):
    """A default that depends on what is called."""

    key: str
    value: Any
    what: str  # in words, for the help and the docs


@dataclass(frozen=True)
class Setting:
    name: str  # the field in RunConfig, CallSettings and a study's `runtime:`
    default: Any  # None: no limit (or, with `cases`, the first case's)
    help: str  # one line: the CLI help and the doc table's meaning
    flag: str | None = None  # `margin run`'s (and `margin ablate`'s) flag
    option: str | None = None  # the `backend_options` key of guard files and study models (endpoint limits)
    runtime: str | None = None  # the key under a study config's `runtime:`
    unit: str = ""  # "s": seconds; "%": a share, shown as a percentage on the command line
    choices: tuple[str, ...] = ()  # the values it takes, when they are names
    cases: tuple[Case, ...] = ()  # defaults that depend on what is called; the first is `default`
    # The values it takes, where it is a number: at least `at_least`, above `above`, at most
    # `at_most` (None: no such bound). The CLI and a study's `runtime:` both check them.
    at_least: float | None = None
    above: float | None = None
    at_most: float | None = None

    def bounds(self) -> Any:
        """The bounds as a pydantic field's metadata: `Annotated[float, SETTING.bounds()]`."""
        from pydantic import Field

        return Field(ge=self.at_least, gt=self.above, le=self.at_most)

    def check_number(self, value: float | None, field: str) -> None:
        """A flag's number within the bounds, and finite where it has a lower bound only
        (exit 2 naming the flag); None (not given) passes."""
        if value is None:
            return
        if self.at_least is not None and not value >= self.at_least:
            raise InputError(f"must be at least {self.at_least:g}", field=field)
        if self.above is not None and not (math.isfinite(value) and value > self.above):
            raise InputError(f"must be a finite number above {self.above:g}", field=field)

    def check_choice(self, value: Any, field: str) -> None:
        """A named value must be one of `choices` (exit 2 naming the flag or key)."""
        if self.choices and value not in self.choices:
            raise InputError(f"unknown {self.name} {value!r}; expected {' or '.join(self.choices)}", field=field)

    def case(self, key: str) -> Any:
        """The default for one of `cases`."""
        return next(c.value for c in self.cases if c.key == key)

    @property
    def flag_default(self) -> Any:
        """The default as the command line takes it (`1%` for a share of 0.01)."""
        return f"{self.default * 100:g}%" if self.unit == "%" else self.default

    def shown(self, value: Any) -> str:
        if value is None:
            return "no limit"
        if self.unit == "%":
            return f"{value * 100:g}%"
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return f"{value} {self.unit}".strip() if not isinstance(value, str) else value

    def default_text(self) -> str:
        """The default in words: `3`, `600 s`, or one per case."""
        if self.cases:
            return "; ".join(f"{self.shown(c.value)} {c.what}" for c in self.cases)
        return self.shown(self.default)

    def cli_help(self) -> str:
        """The flag's help: what it does and, where the flag's own default is None (the
        guard file decides first), the default in words."""
        if self.option is None:
            return self.help
        return f"{self.help} (default: the guard file's backend_options, else {self.default_text()})"


ENGINE = Setting(
    "engine", "ray", flag="--engine", choices=("ray", "local"),
    help="ray (in-process models on Ray actors, restarted when they hang or die) | local (this process, no Ray)")
BATCH_SIZE = Setting(
    "batch_size", 64, at_least=1, flag="--batch-size", runtime="batch_size",
    help="texts per guard call (in-process guards)")
MAX_ATTEMPTS = Setting(
    "max_attempts", 3, at_least=1, flag="--max-attempts", option="max_attempts", runtime="max_attempts",
    help="attempts per text before it counts as missing (hedges come on top)")
CALL_TIMEOUT = Setting(
    "call_timeout_s", 120.0, above=0, flag="--call-timeout", option="timeout_s", runtime="call_timeout_s", unit="s",
    cases=(Case("request", 120.0, "a guard's request"), Case("batch", 300.0, "a guard's batch on a Ray actor"),
           Case("model", 600.0, "a study model's request or batch")),
    help="seconds one request (endpoints) or one batch (in-process models on Ray actors, which are restarted "
         "past it) may take before it is an attempt without output; refused for a model in this process "
         "(--engine local), whose batch cannot be stopped")
MAX_CONCURRENCY = Setting(
    "max_concurrency", 64, at_least=1, flag="--max-concurrency", option="max_concurrency",
    help="endpoints: requests in flight at most (10% less on each 429/503, one more back per success)")
REQUESTS_PER_SECOND = Setting(
    "requests_per_second", None, above=0, flag="--requests-per-second", option="requests_per_second",
    help="endpoints: requests started per second at most (a token bucket, bursts of one second's worth)")
HEDGE_AFTER = Setting(
    "hedge_after_s", "auto", above=0, flag="--hedge-after", option="hedge_after_s",
    help="endpoints: a second copy of a request unanswered after this many seconds | auto (3 x the p95 "
         "latency of the latest 128 answers, at least 1 s) | off")
MAX_OUTAGE = Setting(
    "max_outage_s", 600.0, above=0, flag="--max-outage", option="max_outage_s", runtime="max_outage_s", unit="s",
    help="endpoints: how long one may answer nothing (down, refusing, throttling every request) before the "
         "run stops, resumable: seconds or 45s / 10m / 1h")
RETRY_WAIT = Setting(
    "retry_wait_s", 0.5, at_least=0, runtime="retry_wait_s", unit="s",
    help="the first retry's backoff, doubling (jittered) to 30 s")
MAX_WAIT = Setting(
    "max_wait_s", 0.005, unit="s",
    help="how long a guard actor waits for its batch to fill")
MAX_MISSING = Setting(
    "max_missing", 0.01, at_least=0, at_most=1, flag="--max-missing", runtime="max_missing", unit="%",
    help="fail (exit 1, outputs written) past this share of prompts without a verdict: 1% or 0.01")
DRIVERS = Setting(
    "drivers", 1, flag="--drivers",
    help="drivers searching at once: Ray actors sharing the guard")
DRIVER_CPUS = Setting(
    "driver_cpus", 1.0, flag="--driver-cpus",
    help="CPUs each of --drivers reserves")

SETTINGS: tuple[Setting, ...] = (ENGINE, BATCH_SIZE, MAX_ATTEMPTS, CALL_TIMEOUT, MAX_CONCURRENCY, REQUESTS_PER_SECOND,
                                 HEDGE_AFTER, MAX_OUTAGE, RETRY_WAIT, MAX_WAIT, MAX_MISSING, DRIVERS, DRIVER_CPUS)
#: The endpoint limits, by their `backend_options` key (runtime settings: never in an identity).
LIMIT_OPTIONS: tuple[str, ...] = tuple(s.option for s in SETTINGS if s.option is not None)
