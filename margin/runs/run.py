"""A whole run: dataset + suite + guard -> receipts, results, snapshot and curves.

`prepare` validates every input without writing anything, loading a model or calling the
guard; `execute` runs the searches (on Ray guard actors by default, or in this process) and
its driver is the only writer of the run folder; `finish` writes results, snapshot and
curves for finished searches. A prompt's candidates are built when its search starts and
dropped when it ends, so a run's memory does not grow with its dataset.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.cost import COST_NORMS, CostModel, CostNorm
from margin.datasets import Dataset, load_dataset
from margin.engine.pool import Pool
from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.make import describe_guard, parse_guard_spec
from margin.guards.spec import GuardSpec
from margin.reports.plots import CurveSeries, curves_figure, save
from margin.reports.protocols import mark_protocol, protocol_for
from margin.runfolder import (
    ReceiptWriter,
    atomic_write_text,
    dumps,
    info_from_record,
    info_record,
    read_jsonl,
    write_results,
)
from margin.search.adaptive import DEFAULT_MAX_CALLS
from margin.runs.verdict_cache import VerdictCache, default_cache_path
from margin.search.candidates import Ladder, original_candidate
from margin.runs.driver import Replay
from margin.search.incumbents import load_incumbents
from margin.search.make import STRATEGIES, make_search
from margin.runs.resume import check_manifest, cut_torn_tail, load_replay
from margin.runs.session import ENGINES, CallSettings, Engine, EngineFigures, GuardSession
from margin.runs.shards import select_shard
from margin.search.strategies import PromptSearch
from margin.reports.snapshot import SnapshotEntry, build_snapshot, snapshot_entry
from margin.transforms.suites import Suite, load_suite
from margin.types import Candidate, Flip, GuardCall, GuardInfo, MarginReport, Prompt, SearchResult


@dataclass(frozen=True)
class RunConfig:
    guard: str | GuardSpec
    dataset: str = "sample"
    suite: str = "standard"
    budget: float = 100.0
    search: str = "cheapest"
    seed: int = 0
    limit: int | None = None
    cost_norm: CostNorm = "corpus"
    batch_size: int = 64
    # Call limits; None: the guard file's `backend_options`, else the engine's defaults
    # (`margin.engine.limits.EndpointLimits` for endpoints; 3 attempts and 300 s for batches).
    max_attempts: int | None = None
    call_timeout_s: float | None = None
    max_concurrency: int | None = None
    requests_per_second: float | None = None
    hedge_after_s: float | str | None = None
    retry_wait_s: float = 0.5
    engine: Engine = "ray"
    ray_address: str | None = None
    shard: tuple[int, int] | None = None
    # Drivers searching at once (Ray actors against the same guard; `margin.runs.drivers`),
    # and the CPUs each reserves. They change how fast, never what: results are the same.
    drivers: int = 1
    driver_cpus: float = 1.0
    cache: bool = True
    cache_path: Path | None = None  # default: verdicts.sqlite in margin's cache folder
    max_missing: float = 0.01  # share of prompts that may end missing before the run fails
    max_wait_s: float = 0.005
    # --search adaptive only: guard calls per prompt, and a standard run whose flips seed it.
    max_calls: int | None = None
    incumbents: str | None = None
    # --guard overrides (None: the preset's default)
    backend: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    threshold: float | None = None
    normalize: str | None = None  # a defence before the guard (margin.guards.normalize), e.g. nfkc+skeleton

    def call_settings(self) -> CallSettings:
        return CallSettings(
            engine=self.engine, ray_address=self.ray_address, batch_size=self.batch_size, max_wait_s=self.max_wait_s,
            retry_wait_s=self.retry_wait_s, max_attempts=self.max_attempts, call_timeout_s=self.call_timeout_s,
            max_concurrency=self.max_concurrency, requests_per_second=self.requests_per_second,
            hedge_after_s=self.hedge_after_s)

    def guard_spec(self) -> GuardSpec:
        overrides = {"backend": self.backend, "model": self.model, "base_url": self.base_url,
                     "api_key_env": self.api_key_env, "threshold": self.threshold,
                     "normalize": self.normalize}
        if isinstance(self.guard, GuardSpec):
            given = {k: v for k, v in overrides.items() if v is not None}
            return self.guard.model_copy(update=given) if given else self.guard
        return parse_guard_spec(self.guard, **overrides)


@dataclass
class PreparedRun:
    config: RunConfig
    dataset: Dataset
    suite: Suite
    cost_model: CostModel
    prompts: tuple[Prompt, ...]
    spec: GuardSpec | None = None  # None only for `margin score` replays, which run no guard
    info: GuardInfo | None = None
    guard: Guard | None = None  # an instance a library user passed in: used instead of the spec
    incumbents: dict[str, Flip] = field(default_factory=dict)

    def candidates(self, prompt: Prompt) -> Ladder:
        """The prompt's candidates, built as far as they are read."""
        c = self.config
        return Ladder(prompt, self.suite, self.cost_model, c.budget, c.seed)

    def all_candidates(self, prompt: Prompt) -> list[Candidate]:
        """Every candidate of the prompt, built in full (for analyses, not for searching)."""
        return self.candidates(prompt).all()

    def search(self, prompt: Prompt) -> PromptSearch:
        c = self.config
        candidates: Ladder | list[Candidate] = [] if c.search == "adaptive" else self.candidates(prompt)  # adaptive makes its own
        return make_search(c.search, prompt, original_candidate(prompt, c.seed), candidates, c.budget,
                           **self.search_options(prompt))

    def searches(self) -> Iterator[PromptSearch]:
        """One search per prompt, each made when it is asked for (a driver starts a few at a time)."""
        return (self.search(p) for p in self.prompts)

    def search_options(self, prompt: Prompt) -> dict[str, Any]:
        if self.config.search != "adaptive":
            return {}
        return {"cost_model": self.cost_model, "seed": self.config.seed,
                "max_calls": self.config.max_calls or DEFAULT_MAX_CALLS,
                "incumbent": self.incumbents.get(prompt.id)}

    def manifest(self, info: GuardInfo | None = None) -> dict[str, Any]:
        """Everything that decides a run's results; resume and merge compare it."""
        guard = info or self.info
        assert guard is not None, "a manifest needs the guard's identity"
        return {
            "dataset": {"name": self.dataset.name, "source": self.dataset.source, "sha256": self.dataset.sha256},
            "suite": {"name": self.suite.name, "source": self.suite.source, "sha256": self.suite.sha256},
            "guard": info_record(guard),
            "budget": self.config.budget,
            "cost_norm": self.config.cost_norm,
            "corpus_mean_length": self.cost_model.corpus_mean_length,
            "search": self.config.search,
            "seed": self.config.seed,
            "limit": self.config.limit,
            "shard": list(self.config.shard) if self.config.shard else None,
            **self.adaptive_manifest(),
        }

    def adaptive_manifest(self) -> dict[str, Any]:
        """The protocol always; an adaptive run's call budget and incumbents too."""
        out: dict[str, Any] = {"protocol": protocol_for(self.config.search)}
        if self.config.search == "adaptive":
            out["max_calls"] = self.config.max_calls or DEFAULT_MAX_CALLS
            out["incumbents"] = self.config.incumbents
        return out


@dataclass
class RunOutcome:
    out_dir: Path
    results: list[SearchResult]
    report: MarginReport
    snapshot: dict[str, Any]
    guard_calls: int
    cache_hits: int = 0
    missing: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    figures: EngineFigures = field(default_factory=EngineFigures)


class CoverageError(Exception):
    """Too many prompts ended missing: the run's outputs are written, but it failed."""


def prepare(config: RunConfig, guard: Guard | None = None) -> PreparedRun:
    """Validate every input and describe the guard, loading no model and writing nothing.

    A library user may pass a Guard instance instead of naming one: it is used as it is
    (on Ray it is shipped to the actors), and `config.guard` only names it."""
    if guard is not None and not isinstance(config.guard, GuardSpec):
        spec = GuardSpec(name=config.guard)  # runtime defaults; the identity is guard.info
    else:
        spec = config.guard_spec()
    if spec.replicas < 1:
        raise InputError("must be at least 1", field="--replicas")
    prepared = prepare_inputs(config)
    prepared.spec = spec
    prepared.guard = guard
    prepared.info = guard.info if guard is not None else describe_guard(spec)
    if config.incumbents:
        prepared.incumbents = load_incumbents(config.incumbents, prepared.manifest())
    return prepared


def prepare_inputs(config: RunConfig) -> PreparedRun:
    """Validate the inputs; no guard is involved (`margin score` replays through this)."""
    if config.budget <= 0:
        raise InputError("must be positive", field="--budget")
    if config.search not in STRATEGIES:
        raise InputError(f"unknown search {config.search!r}; expected one of {', '.join(STRATEGIES)}",
                         field="--search")
    if config.cost_norm not in COST_NORMS:
        raise InputError(f"unknown cost norm {config.cost_norm!r}; expected corpus or prompt",
                         field="--cost-norm")
    if config.limit is not None and config.limit < 1:
        raise InputError("must be at least 1", field="--limit")
    if config.engine not in ENGINES:
        raise InputError(f"unknown engine {config.engine!r}; expected ray or local", field="--engine")
    if config.drivers < 1:
        raise InputError("must be at least 1", field="--drivers")
    if config.drivers > 1 and config.engine != "ray":
        raise InputError("several drivers run as Ray actors: use --engine ray (the default)", field="--drivers")
    if config.drivers > 1 and config.shard is not None:
        raise InputError("give --drivers or --shard, not both (drivers split the prompts themselves)", field="--drivers")
    if config.driver_cpus < 0:
        raise InputError("must not be negative", field="--driver-cpus")
    if not 0 <= config.max_missing <= 1:
        raise InputError("must be a share between 0 and 1 (or a percentage such as 1%)", field="--max-missing")
    if config.search != "adaptive" and (config.max_calls is not None or config.incumbents):
        raise InputError("only --search adaptive takes --max-calls and --incumbents", field="--search")
    if config.max_calls is not None and config.max_calls < 2:
        raise InputError("must be at least 2 (the original and one edit)", field="--max-calls")
    dataset = load_dataset(config.dataset)
    suite = load_suite(config.suite)
    # The corpus norm uses every prompt of the dataset, so --limit and shards keep the same units.
    cost_model = CostModel.for_corpus(dataset.texts, config.cost_norm)
    prompts = dataset.prompts[: config.limit] if config.limit else dataset.prompts
    prompts = select_shard(prompts, config.shard)
    return PreparedRun(config, dataset, suite, cost_model, prompts)


def default_out_dir(guard_id: str) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in guard_id)
    return Path("runs") / f"{safe}-{stamp}"


def check_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InputError("output folder exists and is not empty; choose another --out (or --resume it)",
                         path=out_dir)


def claim_out_dir(out_dir: Path) -> None:
    check_out_dir(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def check_run_dir(prepared: PreparedRun, out_dir: Path, resume: bool) -> None:
    """Refuse a used --out, or a --resume folder of another run, before anything starts."""
    if not resume:
        check_out_dir(out_dir)
        return
    saved_path = out_dir / "run.json"
    if not saved_path.is_file():
        raise InputError("not a run folder (no run.json)", path=out_dir, field="--resume")
    saved = next(iter(read_jsonl(saved_path)), None) if saved_path.stat().st_size else None
    if not isinstance(saved, dict):
        raise InputError("run.json is empty or not a JSON object", path=saved_path)
    check_manifest(out_dir, saved, prepared.manifest())


def open_run_dir(prepared: PreparedRun, out_dir: Path, resume: bool) -> Replay:
    """Claim a new run folder (writing run.json), or load what a killed run recorded."""
    check_run_dir(prepared, out_dir, resume)
    if not resume:
        claim_out_dir(out_dir)
        atomic_write_text(out_dir / "run.json", dumps(prepared.manifest()) + "\n")
        return Replay()
    receipts = out_dir / "receipts.jsonl"
    cut_torn_tail(receipts)
    return load_replay(receipts)


def execute(
    prepared: PreparedRun,
    out_dir: Path,
    *,
    resume: bool = False,
    on_call: Callable[[GuardCall], None] = lambda _: None,
    on_result: Callable[[SearchResult], None] = lambda _: None,
    on_batch: Callable[[int, int, float], None] = lambda *_: None,
) -> RunOutcome:
    if prepared.config.drivers > 1:
        from margin.runs.drivers import execute_drivers

        return execute_drivers(prepared, out_dir, resume=resume, on_result=on_result, on_batch=on_batch)
    searched = search(prepared, out_dir, resume=resume, on_call=on_call, on_result=on_result, on_batch=on_batch)
    outcome = finish(prepared, out_dir, searched.results, guard_calls=searched.guard_calls,
                     cache_hits=searched.cache_hits)
    outcome.figures = searched.figures
    return outcome


@dataclass
class Searched:
    """A run's search, done: its results, in prompt order, and how its calls went."""

    results: list[SearchResult]
    guard_calls: int
    cache_hits: int
    figures: EngineFigures


def search(
    prepared: PreparedRun,
    out_dir: Path,
    *,
    resume: bool = False,
    run_id: str | None = None,
    pool: Pool | None = None,
    on_call: Callable[[GuardCall], None] = lambda _: None,
    on_result: Callable[[SearchResult], None] = lambda _: None,
    on_batch: Callable[[int, int, float], None] = lambda *_: None,
) -> Searched:
    """The search part of a run: the run folder claimed (or resumed), receipts written, every
    prompt searched; results, snapshot and curves not yet written. `pool`: guard actors made
    elsewhere (`margin.runs.drivers`); `run_id`: the receipts' (default: a new one, or the
    killed run's)."""
    config = prepared.config
    assert prepared.spec is not None and prepared.info is not None, "execute() needs prepare()"
    info = prepared.info
    check_run_dir(prepared, out_dir, resume)  # before anything starts: a wrong folder fails fast
    receipts: ReceiptWriter | None = None
    cache: VerdictCache | None = None
    session = GuardSession(prepared.spec, info, config.call_settings(), guard=prepared.guard, pool=pool,
                           on_batch=on_batch)
    try:
        with session:
            # Only now, with the guard running, is anything written.
            replay = open_run_dir(prepared, out_dir, resume)
            receipts = ReceiptWriter(out_dir / "receipts.jsonl", replay.run_id or run_id or secrets.token_hex(8),
                                     info.id)
            writer = receipts
            if config.cache:
                cache = VerdictCache(config.cache_path or default_cache_path(), info)

            def record_call(call: GuardCall) -> None:
                writer.call(call)
                on_call(call)

            def record_result(result: SearchResult) -> None:
                if result.prompt_id not in replay.results:  # a killed run may have written it
                    writer.result(result)
                on_result(result)

            driver = session.search(prepared.searches(), total=len(prepared.prompts), cache=cache, replay=replay,
                                    on_call=record_call, on_result=record_result, on_flush=writer.flush)
    finally:
        if receipts is not None:
            receipts.close()
        if cache is not None:
            cache.close()
    return Searched(driver.ordered_results(), driver.sent, driver.stats.cache_hits, session.figures)


def provenance(manifest: dict[str, Any], prompts: int) -> dict[str, Any]:
    return {
        "dataset": {"name": manifest["dataset"]["name"], "sha256": manifest["dataset"]["sha256"]},
        "suite": {"name": manifest["suite"]["name"], "sha256": manifest["suite"]["sha256"]},
        "budget": manifest["budget"],
        "cost_norm": manifest["cost_norm"],
        "corpus_mean_length": manifest["corpus_mean_length"],
        "seed": manifest["seed"],
        "search": manifest["search"],
        "prompts": prompts,
        **({"shard": manifest["shard"]} if manifest.get("shard") else {}),
    }


def snapshot_for(manifest: dict[str, Any], guard: GuardInfo,
                 results: list[SearchResult]) -> tuple[dict[str, Any], SnapshotEntry]:
    """A run's snapshot from its manifest and results; `margin run`, `margin merge` and
    `margin score` all build it here, so a rescore or a merge matches a run exactly."""
    evaluation = {"search": manifest["search"], "seed": manifest["seed"],
                  "normalize": dict(guard.params).get("normalize", "none")}
    entry = snapshot_entry(guard, results, float(manifest["budget"]), evaluation)
    snapshot = build_snapshot([entry], provenance(manifest, len(results)))
    return mark_protocol(snapshot, manifest["search"]), entry


def run_snapshot(prepared: PreparedRun, guard: GuardInfo,
                 results: list[SearchResult]) -> tuple[dict[str, Any], SnapshotEntry]:
    return snapshot_for(prepared.manifest(guard), guard, results)


def write_curves(stem: Path, snapshot: dict[str, Any]) -> None:
    """RA curves with bootstrap bands, as PNG and SVG."""
    meta = snapshot["meta"]["provenance"]
    record = snapshot["data"][0]
    how = ("adaptive search: upper bounds" if meta.get("search") == "adaptive"
           else f"{meta['suite']['name']} suite")
    title = f"{record['id']} on {meta['dataset']['name']} ({how})"
    save(curves_figure([CurveSeries.from_record(record)], title), stem)


def write_outputs(out_dir: Path, manifest: dict[str, Any],
                  results: list[SearchResult]) -> tuple[MarginReport, dict[str, Any]]:
    """results.jsonl, snapshot.json and curves (PNG, SVG) from a manifest and finished results."""
    snapshot, entry = snapshot_for(manifest, info_from_record(manifest["guard"]), results)
    write_results(out_dir / "results.jsonl", results)
    atomic_write_text(out_dir / "snapshot.json", dumps(snapshot) + "\n")
    write_curves(out_dir / "curves", snapshot)
    return entry.report, snapshot


def finish(prepared: PreparedRun, out_dir: Path, results: list[SearchResult], *,
           guard_calls: int, cache_hits: int = 0) -> RunOutcome:
    """Write results, snapshot and curves for finished searches."""
    report, snapshot = write_outputs(out_dir, prepared.manifest(), results)
    return RunOutcome(out_dir, results, report, snapshot, guard_calls, cache_hits,
                      missing=sum(1 for r in results if r.status == "missing"))


def check_coverage(results: list[SearchResult], max_missing: float) -> None:
    """Fail a run whose lost coverage is above `max_missing` (a share of its prompts)."""
    missing = sum(1 for r in results if r.status == "missing")
    if results and missing / len(results) > max_missing:
        raise CoverageError(
            f"{missing} of {len(results)} prompts ({100 * missing / len(results):.1f}%) have no verdict "
            f"after every retry, above --max-missing {100 * max_missing:g}%; their errors are in "
            f"receipts.jsonl (rerun with --resume to retry them, or raise --max-attempts)"
        )
