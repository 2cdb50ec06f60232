"""A whole run: dataset + suite + guard -> receipts, results, snapshot and curves.

`prepare` validates every input and builds every candidate without writing anything or
calling the guard; `execute` runs the searches and is the only writer of the run folder.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from margin.cost import COST_NORMS, CostModel, CostNorm
from margin.datasets import Dataset, load_dataset
from margin.errors import InputError
from margin.guards.base import Guard
from margin.guards.normalize import NORMALIZATIONS, NormalizingGuard
from margin.guards.spec import GuardSpec, build_guard, parse_guard_spec
from margin.plots import CurveSeries, curves_figure, save
from margin.protocols import mark_protocol, protocol_for
from margin.records import ReceiptWriter, atomic_write_text, dumps, write_results
from margin.search.adaptive import DEFAULT_MAX_CALLS
from margin.search.candidates import build_candidates, original_candidate
from margin.search.driver import drive
from margin.search.incumbents import load_incumbents
from margin.search.source import InProcessSource
from margin.search.strategies import STRATEGIES, PromptSearch, make_search
from margin.snapshot import SnapshotEntry, build_snapshot, snapshot_entry
from margin.suggest import did_you_mean
from margin.transforms.suites import Suite, load_suite
from margin.types import Flip, GuardCall, GuardInfo, MarginReport, Prompt, SearchResult


@dataclass(frozen=True)
class RunConfig:
    guard: str
    dataset: str = "sample"
    suite: str = "standard"
    budget: float = 100.0
    search: str = "cheapest"
    seed: int = 0
    limit: int | None = None
    cost_norm: CostNorm = "corpus"
    batch_size: int = 64
    max_attempts: int = 3
    retry_wait_s: float = 0.5
    # --search adaptive only: guard calls per prompt, and a standard run whose flips seed it.
    max_calls: int | None = None
    incumbents: str | None = None
    # --guard overrides (None: the preset's default)
    backend: str | None = None
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    threshold: float | None = None

    def guard_spec(self) -> GuardSpec:
        return parse_guard_spec(self.guard, backend=self.backend, model=self.model, base_url=self.base_url,
                                api_key_env=self.api_key_env, threshold=self.threshold)
    normalize: str | None = None  # nfkc | strip-format | nfkc+strip-format, before the guard


@dataclass
class PreparedRun:
    config: RunConfig
    dataset: Dataset
    suite: Suite
    cost_model: CostModel
    prompts: tuple[Prompt, ...]
    candidates: dict[str, list[Any]]
    guard: Guard | None = None
    incumbents: dict[str, Flip] = field(default_factory=dict)

    def searches(self) -> list[PromptSearch]:
        return [
            make_search(self.config.search, p, original_candidate(p, self.config.seed),
                        self.candidates[p.id], self.config.budget, **self.search_options(p))
            for p in self.prompts
        ]

    def search_options(self, prompt: Prompt) -> dict[str, Any]:
        if self.config.search != "adaptive":
            return {}
        return {"cost_model": self.cost_model, "seed": self.config.seed,
                "max_calls": self.config.max_calls or DEFAULT_MAX_CALLS,
                "incumbent": self.incumbents.get(prompt.id)}

    def manifest(self) -> dict[str, Any]:
        """Everything that decides a run's results; resume and publish compare it."""
        assert self.guard is not None
        info = self.guard.info
        return {
            "dataset": {"name": self.dataset.name, "source": self.dataset.source, "sha256": self.dataset.sha256},
            "suite": {"name": self.suite.name, "source": self.suite.source, "sha256": self.suite.sha256},
            "guard": {"id": info.id, "family": info.family, "checkpoint": info.checkpoint,
                      "revision": info.revision, "backend": info.backend,
                      "template_sha256": info.template_sha256, "threshold": info.threshold,
                      "params": dict(info.params),
                      # kept so `margin score` rebuilds the snapshot's evaluation block exactly
                      "template": info.template, "caveats": list(info.caveats)},
            "budget": self.config.budget,
            "cost_norm": self.config.cost_norm,
            "corpus_mean_length": self.cost_model.corpus_mean_length,
            "search": self.config.search,
            "seed": self.config.seed,
            "limit": self.config.limit,
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


def prepare(config: RunConfig, guard: Guard | None = None) -> PreparedRun:
    prepared = prepare_inputs(config)
    prepared.guard = guard or build_guard(config.guard_spec())
    if config.normalize is not None:
        prepared.guard = NormalizingGuard(prepared.guard, config.normalize)
    if config.incumbents:
        prepared.incumbents = load_incumbents(config.incumbents, prepared.manifest())
    return prepared


def prepare_inputs(config: RunConfig) -> PreparedRun:
    """Validate the inputs and build every candidate, loading no guard (`margin score` replays)."""
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
    if config.search != "adaptive" and (config.max_calls is not None or config.incumbents):
        raise InputError("only --search adaptive takes --max-calls and --incumbents", field="--search")
    if config.max_calls is not None and config.max_calls < 2:
        raise InputError("must be at least 2 (the original and one edit)", field="--max-calls")
    if config.normalize is not None and config.normalize not in NORMALIZATIONS:
        raise InputError(f"unknown normalisation {config.normalize!r}; expected one of "
                         f"{', '.join(NORMALIZATIONS)}{did_you_mean(config.normalize, NORMALIZATIONS)}",
                         field="--normalize")
    dataset = load_dataset(config.dataset)
    suite = load_suite(config.suite)
    # The corpus norm uses every prompt of the dataset, so --limit and shards keep the same units.
    cost_model = CostModel.for_corpus(dataset.texts, config.cost_norm)
    prompts = dataset.prompts[: config.limit] if config.limit else dataset.prompts
    candidates = {  # adaptive search makes its own
        p.id: [] if config.search == "adaptive" else build_candidates(p, suite, cost_model, config.budget, config.seed)
        for p in prompts
    }
    return PreparedRun(config, dataset, suite, cost_model, prompts, candidates)


def default_out_dir(guard_id: str) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in guard_id)
    return Path("runs") / f"{safe}-{stamp}"


def claim_out_dir(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise InputError("output folder exists and is not empty; choose another --out", path=out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)


def execute(
    prepared: PreparedRun,
    out_dir: Path,
    *,
    on_call: Callable[[GuardCall], None] = lambda _: None,
    on_result: Callable[[SearchResult], None] = lambda _: None,
) -> RunOutcome:
    assert prepared.guard is not None
    config = prepared.config
    guard = prepared.guard
    claim_out_dir(out_dir)
    manifest = prepared.manifest()
    atomic_write_text(out_dir / "run.json", dumps(manifest) + "\n")
    run_id = secrets.token_hex(8)
    receipts = ReceiptWriter(out_dir / "receipts.jsonl", run_id, guard.info.id)
    source = InProcessSource(guard, max_attempts=config.max_attempts, retry_wait_s=config.retry_wait_s)
    counts = {"cached": 0, "missing": 0}

    def record_call(call: GuardCall) -> None:
        receipts.call(call)
        counts["cached"] += call.cached
        on_call(call)

    def record_result(result: SearchResult) -> None:
        receipts.result(result)
        counts["missing"] += result.status == "missing"
        on_result(result)

    try:
        results = drive(prepared.searches(), source, batch_size=max(config.batch_size, 1),
                        on_call=record_call, on_result=record_result)
    finally:
        receipts.close()
    return finish(prepared, out_dir, results, guard_calls=source.calls, cache_hits=counts["cached"])


def finish(prepared: PreparedRun, out_dir: Path, results: list[SearchResult], *,
           guard_calls: int, cache_hits: int = 0) -> RunOutcome:
    """Write results, snapshot and curves for finished searches."""
    assert prepared.guard is not None
    write_results(out_dir / "results.jsonl", results)
    snapshot, entry = run_snapshot(prepared, prepared.guard.info, results)
    atomic_write_text(out_dir / "snapshot.json", dumps(snapshot) + "\n")
    write_curves(out_dir / "curves", snapshot)
    return RunOutcome(out_dir, results, entry.report, snapshot, guard_calls, cache_hits,
                      missing=sum(1 for r in results if r.status == "missing"))


def run_snapshot(prepared: PreparedRun, guard: GuardInfo,
                 results: list[SearchResult]) -> tuple[dict[str, Any], SnapshotEntry]:
    """The run's snapshot; `margin score` calls this too, so a rescore matches it exactly."""
    config = prepared.config
    provenance = {
        "dataset": {"name": prepared.dataset.name, "sha256": prepared.dataset.sha256},
        "suite": {"name": prepared.suite.name, "sha256": prepared.suite.sha256},
        "budget": config.budget,
        "cost_norm": config.cost_norm,
        "corpus_mean_length": prepared.cost_model.corpus_mean_length,
        "seed": config.seed,
        "search": config.search,
        "prompts": len(prepared.prompts),
    }
    evaluation = {"search": config.search, "seed": config.seed, "normalize": config.normalize or "none"}
    entry = snapshot_entry(guard, results, config.budget, evaluation)
    return mark_protocol(build_snapshot([entry], provenance), config.search), entry


def write_curves(stem: Path, snapshot: dict[str, Any]) -> None:
    """RA curves with bootstrap bands, as PNG and SVG."""
    meta = snapshot["meta"]["provenance"]
    record = snapshot["data"][0]
    how = ("adaptive search: upper bounds" if meta.get("search") == "adaptive"
           else f"{meta['suite']['name']} suite")
    title = f"{record['id']} on {meta['dataset']['name']} ({how})"
    save(curves_figure([CurveSeries.from_record(record)], title), stem)
