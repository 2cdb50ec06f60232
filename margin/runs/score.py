"""`margin score`: recompute a run's results, snapshot and analyses from recorded verdicts.

Candidates are rebuilt from the dataset, suite, budget, cost norm and seed (run.json's, or
the options' for verdicts produced elsewhere), then the recorded verdicts are replayed
through the same search state machines and the same snapshot code as a live run, so a
rescore of a run folder reproduces its results.jsonl and snapshot exactly. No guard is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from margin.errors import InputError
from margin.reports.observations import PromptObservations, Variant
from margin.reports.snapshot import SnapshotEntry
from margin.runfolder import (
    atomic_write_text,
    dumps,
    guard_info,
    read_manifest,
    read_results,
    write_results,
)
from margin.runs.config import RunConfig
from margin.runs.folder import claim_out_dir
from margin.runs.outputs import reason_from, run_snapshot, write_curves
from margin.runs.prepare import PreparedRun, prepare_inputs
from margin.runs.recorded import (
    Recorded,
    RecordedVerdicts,
    ReplaySource,
    candidate_key,
    read_verdicts,
    unmatched,
)
from margin.runs.subset import method_of
from margin.search.make import STRATEGIES, STRATEGY_TABLE
from margin.types import Candidate, GuardInfo, Prompt, SearchResult

#: run.json fields that must agree when several run folders are scored together.
MUST_AGREE = ("dataset.sha256", "suite.sha256", "budget", "cost_norm", "seed", "limit", "limit_sample", "guard")


@dataclass(frozen=True)
class ScoreOptions:
    """Overrides of run.json, and what verdicts produced elsewhere need."""

    dataset: str | None = None
    suite: str | None = None
    budget: float | None = None
    cost_norm: str | None = None
    seed: int | None = None
    search: str | None = None
    limit: int | None = None
    guard_id: str | None = None


@dataclass
class Rescored:
    prepared: PreparedRun
    guard: GuardInfo
    results: list[SearchResult]
    snapshot: dict[str, Any]
    entry: SnapshotEntry
    observations: list[PromptObservations]
    recorded: RecordedVerdicts
    unmatched: list[Recorded]
    inputs: list[Path]
    manifest: dict[str, Any] | None = None
    differs_from_run: list[str] | None = None  # prompt ids whose result differs from the run's
    notes: list[str] = field(default_factory=list)

    @property
    def exhaustive(self) -> bool:
        """Every candidate of every prompt has a verdict: per-transform figures are unbiased."""
        return all(o.complete for o in self.observations)


def _get(manifest: dict[str, Any], dotted: str) -> Any:
    value: Any = manifest
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _comparable_guard(manifest: dict[str, Any]) -> Any:
    guard = dict(manifest.get("guard") or {})
    guard.pop("template", None)  # descriptive only; identity is template_sha256
    guard.pop("caveats", None)
    guard.pop("scope", None)  # descriptive too: changes no verdict
    return guard


def agree(manifests: Sequence[tuple[Path, dict[str, Any]]]) -> None:
    first_path, first = manifests[0]
    for path, manifest in manifests[1:]:
        for name in MUST_AGREE:
            a = _comparable_guard(first) if name == "guard" else _get(first, name)
            b = _comparable_guard(manifest) if name == "guard" else _get(manifest, name)
            if a != b:
                raise InputError(f"{name} differs from {first_path / 'run.json'} ({b!r} vs {a!r}); "
                                 "only runs of the same guard, dataset and suite merge", path=path / "run.json")


def dataset_spec(manifest: dict[str, Any]) -> str:
    name, source = _get(manifest, "dataset.name"), _get(manifest, "dataset.source")
    if name in ("sample", "xstest"):
        return str(name)
    return str(source)


def suite_spec(manifest: dict[str, Any]) -> str:
    source = str(_get(manifest, "suite.source") or "")
    if source.startswith("margin/transforms/suites/") and source.endswith(".yaml"):
        return source[len("margin/transforms/suites/"):-len(".yaml")]
    return source


def split_inputs(paths: Sequence[Path]) -> tuple[list[Path], list[Path]]:
    """(run folders, verdict files); every folder must be a run folder."""
    runs, files = [], []
    for path in paths:
        if path.is_dir():
            if not (path / "run.json").is_file():
                raise InputError("not a run folder (no run.json)", path=path)
            runs.append(path)
        elif path.is_file():
            files.append(path)
        else:
            raise InputError("no such run folder or verdict file", path=path)
    return runs, files


def config_for(manifest: dict[str, Any] | None, options: ScoreOptions, guard_id: str) -> RunConfig:
    m = manifest or {}
    dataset = options.dataset or (dataset_spec(m) if manifest else None)
    suite = options.suite or (suite_spec(m) if manifest else None)
    if dataset is None or suite is None:
        raise InputError("verdicts without a run folder need --dataset and --suite (the ones they were made with)",
                         field="--dataset" if dataset is None else "--suite")
    search = options.search or str(m.get("search") or "cheapest")
    if search not in STRATEGIES:
        search = "cheapest"  # a name no strategy here has: replay the suite, cheapest first
    # the recorded search's own options (--max-calls, --one-edit), so it asks what it asked
    taken = STRATEGY_TABLE[search].options if search == m.get("search") else ()
    return RunConfig(
        max_calls=m.get("max_calls") if "max_calls" in taken else None,
        one_edit=m.get("one_edit") if "one_edit" in taken else None,
        guard=guard_id,
        dataset=dataset,
        suite=suite,
        budget=options.budget if options.budget is not None else float(m.get("budget", 100.0)),
        search=search,
        seed=options.seed if options.seed is not None else int(m.get("seed", 0)),
        limit=options.limit if options.limit is not None else m.get("limit"),
        limit_method=method_of(m) if options.limit in (None, m.get("limit")) else "stratified",
        cost_norm=options.cost_norm or m.get("cost_norm", "corpus"),  # type: ignore[arg-type]  # prepare checks it
    )


def check_identity(prepared: PreparedRun, manifest: dict[str, Any] | None, where: Path | None) -> None:
    """The rebuilt dataset and suite must be the bytes the run used."""
    if manifest is None:
        return
    for name, actual in (("dataset", prepared.dataset.sha256), ("suite", prepared.suite.sha256)):
        expected = _get(manifest, f"{name}.sha256")
        if expected and expected != actual:
            raise InputError(f"the {name} found has SHA-256 {actual[:12]}…, the run used {expected[:12]}…; "
                             f"pass the run's file with --{name}", path=where)


def external_guard(guard_id: str) -> GuardInfo:
    return GuardInfo(id=guard_id, family="external", checkpoint="", revision="", backend="external",
                     caveats=("verdicts produced outside margin, replayed by margin score",))


def rescore(paths: Sequence[Path], options: ScoreOptions | None = None) -> Rescored:
    options = options or ScoreOptions()
    run_dirs, files = split_inputs(paths)
    manifests = [(d, read_manifest(d / "run.json")) for d in run_dirs]
    if manifests:
        agree(manifests)
    manifest = manifests[0][1] if manifests else None
    receipts = [p / "receipts.jsonl" if p.is_dir() else p for p in paths]  # in the order given
    recorded = read_verdicts(receipts)
    guard = (guard_info(manifest, run_dirs[0] / "run.json") if manifest
             else external_guard(options.guard_id or recorded.guard_id or "external"))
    if options.guard_id and manifest:
        guard = replace(guard, id=options.guard_id)
    prepared = prepare_inputs(config_for(manifest, options, guard.id))
    check_identity(prepared, manifest, run_dirs[0] / "run.json" if run_dirs else None)

    searches = list(prepared.searches())
    source = ReplaySource(recorded.by_key)
    results = source.run(searches)
    # A result's guard_calls is what the run asked the guard about for that prompt, as recorded.
    keys_by_prompt = {s.prompt.id: [candidate_key(c) for c in (s.original, *s.all_candidates())] for s in searches}
    if not prepared.strategy.from_suite:
        # Adaptive and bon searches make their candidates as they go: what they asked for is their set.
        for key in sorted(source.asked, key=repr):
            if key[1] is not None:
                keys_by_prompt.setdefault(key[0], []).append(key)
    results = [replace(r, guard_calls=sum(k in recorded.by_key for k in keys_by_prompt[r.prompt_id]))
               for r in results]
    observations = [observe(s.prompt, s.original, s.all_candidates(), source) for s in searches]
    snapshot, entry = run_snapshot(prepared, guard, results, reason_from(receipts, results))
    all_keys = [k for ks in keys_by_prompt.values() for k in ks]
    rescored = Rescored(prepared, guard, results, snapshot, entry, observations, recorded,
                        unmatched(recorded.by_key, all_keys), list(paths), manifest)
    if len(run_dirs) == 1 and not files and (run_dirs[0] / "results.jsonl").is_file():
        before = {r.prompt_id: r for r in read_results(run_dirs[0] / "results.jsonl")}
        rescored.differs_from_run = [r.prompt_id for r in results if before.get(r.prompt_id) != r]
    return rescored


def observe(prompt: Prompt, original: Candidate, candidates: Sequence[Candidate],
            source: ReplaySource) -> PromptObservations:
    """Every rebuilt candidate of one prompt with its recorded verdict (None where none is)."""
    variants = tuple(Variant(c.transform or "", c.strength or "", c.seed, c.cost, source.verdict(c))
                     for c in candidates)
    return PromptObservations(prompt.id, prompt.label, prompt.type, source.verdict(original), variants)


def write_rescore(rescored: Rescored, out_dir: Path, extra_files: dict[str, str] | None = None) -> list[Path]:
    """results.jsonl, snapshot.json, curves.png/.svg and run.json (with what it was scored from)."""
    claim_out_dir(out_dir)
    write_results(out_dir / "results.jsonl", rescored.results)
    atomic_write_text(out_dir / "snapshot.json", dumps(rescored.snapshot) + "\n")
    write_curves(out_dir / "curves", rescored.snapshot)
    manifest = {**(rescored.manifest or {}), "scored_from": [str(p) for p in rescored.inputs]}
    if rescored.manifest is None:
        prepared = rescored.prepared
        manifest.update({
            "dataset": {"name": prepared.dataset.name, "source": prepared.dataset.source,
                        "sha256": prepared.dataset.sha256},
            "suite": {"name": prepared.suite.name, "source": prepared.suite.source,
                      "sha256": prepared.suite.sha256},
            "guard": {"id": rescored.guard.id, "family": rescored.guard.family,
                      "backend": rescored.guard.backend, "caveats": list(rescored.guard.caveats)},
            "budget": prepared.config.budget, "cost_norm": prepared.config.cost_norm,
            "corpus_mean_length": prepared.cost_model.corpus_mean_length,
            "search": prepared.config.search, "seed": prepared.config.seed, "limit": prepared.config.limit,
            **prepared.limit_sample,
        })
    atomic_write_text(out_dir / "run.json", dumps(manifest) + "\n")
    written = [out_dir / n for n in ("results.jsonl", "snapshot.json", "curves.png", "curves.svg", "run.json")]
    for name, text in (extra_files or {}).items():
        atomic_write_text(out_dir / name, text)
        written.append(out_dir / name)
    return written
