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

from margin.errors import InputError
from margin.reports.observations import PromptObservations, Variant
from margin.reports.snapshot import SnapshotEntry
from margin.reports.snapshot_schema import Snapshot
from margin.runfolder import (
    dumps,
    read_results,
    read_run_record,
    write_results,
    write_run_record,
)
from margin.runrecord import (
    DEFAULT_BUDGET,
    DEFAULT_COST_NORM,
    DEFAULT_SEARCH,
    DEFAULT_SEED,
    SAME_VERDICTS,
    RunRecord,
)
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import PreparedRun, prepare_inputs
from margin.runs.recording.folder import claim_out_dir
from margin.runs.recording.outputs import reason_from, snapshot_for, write_curves
from margin.runs.recording.recorded import (
    Recorded,
    RecordedVerdicts,
    ReplaySource,
    candidate_key,
    read_verdicts,
    unmatched,
)
from margin.search.incumbents import load_incumbents
from margin.search.make import STRATEGIES, STRATEGY_TABLE
from margin.types import Candidate, Flip, GuardInfo, Prompt, SearchResult
from margin.util.safefiles import atomic_write_text


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
    snapshot: Snapshot
    entry: SnapshotEntry
    observations: list[PromptObservations]
    recorded: RecordedVerdicts
    unmatched: list[Recorded]
    inputs: list[Path]
    record: RunRecord | None = None  # the run folders' record (None: verdict files alone)
    differs_from_run: list[str] | None = None  # prompt ids whose result differs from the run's
    notes: list[str] = field(default_factory=list)

    @property
    def exhaustive(self) -> bool:
        """Every candidate of every prompt has a verdict: per-transform figures are unbiased."""
        return all(o.complete for o in self.observations)


def check_same_verdicts(records: Sequence[tuple[Path, RunRecord]]) -> None:
    """Run folders scored together must have asked the same guard about the same candidates."""
    first_path, first = records[0]
    for path, record in records[1:]:
        changed = first.differences(record, SAME_VERDICTS)
        if changed:
            name = changed[0]
            raise InputError(f"{name} differs from {first_path / 'run.json'} ({record.value(name)!r} vs "
                             f"{first.value(name)!r}); only runs of the same guard, dataset and suite merge",
                             path=path / "run.json")


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


def config_for(record: RunRecord | None, options: ScoreOptions, guard_id: str) -> RunConfig:
    dataset = options.dataset or (record.dataset_spec if record else None)
    suite = options.suite or (record.suite_spec if record else None)
    if dataset is None or suite is None:
        raise InputError("verdicts without a run folder need --dataset and --suite (the ones they were made with)",
                         field="--dataset" if dataset is None else "--suite")
    search = options.search or (record.search if record else DEFAULT_SEARCH)
    if search not in STRATEGIES:
        search = "cheapest"  # a name no strategy here has: replay the suite, cheapest first
    limit = record.limit if record else None
    # the run's way of choosing its prompts, unless another --limit asks for a new sample
    method = (record.limit_method if record else "stratified") if options.limit in (None, limit) else "stratified"
    # the recorded search's own options (--max-calls, --incumbents, --one-edit), so it asks what it asked
    taken = STRATEGY_TABLE[search].options if record and search == record.search else ()
    return RunConfig(
        max_calls=record.max_calls if record and "max_calls" in taken else None,
        one_edit=record.one_edit if record and "one_edit" in taken else None,
        incumbents=record.incumbents if record and "incumbents" in taken else None,
        guard=guard_id,
        dataset=dataset,
        suite=suite,
        budget=options.budget if options.budget is not None else (float(record.budget) if record else DEFAULT_BUDGET),
        search=search,
        seed=options.seed if options.seed is not None else (record.seed if record else DEFAULT_SEED),
        limit=options.limit if options.limit is not None else limit,
        limit_method=method,
        cost_norm=options.cost_norm or (record.cost_norm if record else DEFAULT_COST_NORM),  # type: ignore[arg-type]
        target=record.target_name if record else "prompt",
        policies=record.policies.source if record and record.policies else None,
    )


def seeds(prepared: PreparedRun, where: Path | None) -> dict[str, Flip]:
    """The flips of the standard run a seeded adaptive run began from (it must still be there)."""
    incumbents = prepared.config.incumbents
    assert incumbents is not None
    if not Path(incumbents).is_dir():
        raise InputError(f"the run was seeded with --incumbents {incumbents}, which is not here: score it where "
                         "that run folder is (its flips decide what the search asked)", path=where)
    return load_incumbents(incumbents, prepared.record)


def check_identity(prepared: PreparedRun, record: RunRecord | None, where: Path | None) -> None:
    """The rebuilt dataset and suite must be the bytes the run used."""
    if record is None:
        return
    for name, actual in (("dataset", prepared.dataset.sha256), ("suite", prepared.suite.sha256)):
        expected = record.value(f"{name}.sha256")
        if expected and expected != actual:
            raise InputError(f"the {name} found has SHA-256 {actual[:12]}…, the run used {expected[:12]}…; "
                             f"pass the run's file with --{name}", path=where)


def external_guard(guard_id: str) -> GuardInfo:
    return GuardInfo(id=guard_id, family="external", checkpoint="", revision="", backend="external",
                     caveats=("verdicts produced outside margin, replayed by margin score",))


def rescore(paths: Sequence[Path], options: ScoreOptions | None = None) -> Rescored:
    options = options or ScoreOptions()
    run_dirs, files = split_inputs(paths)
    records = [(d, read_run_record(d)) for d in run_dirs]
    if records:
        check_same_verdicts(records)
    record = records[0][1] if records else None
    receipts = [p / "receipts.jsonl" if p.is_dir() else p for p in paths]  # in the order given
    recorded = read_verdicts(receipts)
    guard = record.guard if record else external_guard(options.guard_id or recorded.guard_id or "external")
    if options.guard_id and record:
        guard = replace(guard, id=options.guard_id)
    where = run_dirs[0] / "run.json" if run_dirs else None
    prepared = replace(prepare_inputs(config_for(record, options, guard.id)), info=guard)
    if prepared.config.incumbents:  # the seeds the run began from, so each search asks what it asked
        prepared = replace(prepared, incumbents=seeds(prepared, where))
    check_identity(prepared, record, where)

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
    snapshot, entry = snapshot_for(prepared.record, results, reason_from(receipts, results))
    all_keys = [k for ks in keys_by_prompt.values() for k in ks]
    rescored = Rescored(prepared, guard, results, snapshot, entry, observations, recorded,
                        unmatched(recorded.by_key, all_keys), list(paths), record)
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
    atomic_write_text(out_dir / "snapshot.json", dumps(rescored.snapshot.document()) + "\n")
    write_curves(out_dir / "curves", rescored.snapshot)
    record = rescored.record or rescored.prepared.record  # verdicts alone: what they were scored with
    write_run_record(out_dir, replace(record, scored_from=tuple(str(p) for p in rescored.inputs)))
    written = [out_dir / n for n in ("results.jsonl", "snapshot.json", "curves.png", "curves.svg", "run.json")]
    for name, text in (extra_files or {}).items():
        atomic_write_text(out_dir / name, text)
        written.append(out_dir / name)
    return written
