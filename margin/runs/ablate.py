"""`margin ablate`: one guard behind each of several defences, one run per defence.

The candidates are built once and shared: every run searches the same texts at the same
costs, so each defence's run is exactly `margin run --normalize D` on the same inputs, and
any difference between runs comes from the defence alone. `none` (the bare guard) always
runs first: every change is measured against it. The output folder holds one run folder per
defence (named by the defence), `ablation.json` (`margin.reports.ablation`) and the figures.
A killed ablation resumes in its folder: each defence's run resumes as `margin run --resume`
does (finished ones replay their receipts), those not begun start, and the files written at
the end are written as an uninterrupted ablation writes them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from margin.errors import InputError
from margin.guards.make import describe_guard
from margin.guards.normalize import NONE, canonical, guard_texts, steps_of
from margin.guards.served_spec import served_spec
from margin.reports.ablation import BASELINE, Ablation, DefenceRun, ablation_record
from margin.reports.effectiveness import effectiveness
from margin.reports.observations import CallLine, from_receipts, read_calls
from margin.reports.plots import ablation_figure, heatmap_figure, save
from margin.runfolder import dumps, read_jsonl
from margin.runs.executing.execute import execute
from margin.runs.executing.resume import check_run_dir
from margin.runs.preparing.config import RunConfig
from margin.runs.preparing.prepare import PreparedRun, check_call_timeout, prepare_inputs
from margin.runs.recording.folder import check_out_dir
from margin.runs.recording.outputs import RunOutcome, provenance
from margin.search.candidates import original_candidate
from margin.search.make import strategy
from margin.serving.guard_pool import is_remote
from margin.util.folderlock import entries, hold
from margin.util.provenance import git_commit, margin_version
from margin.util.safefiles import atomic_write_text, safe_name

#: What an ablation writes besides its defences' run folders (at the end, so after any resume).
END_FILES = ("ablation.json", "ablation.png", "ablation.svg", "ablation-families.png", "ablation-families.svg")


@dataclass(frozen=True)
class Defence:
    label: str  # as the user wrote it (also the run folder's name)
    normalize: str | None  # canonical name; None for no defence


def parse_defences(text: str) -> list[Defence]:
    """`--defences` as a list, `none` first (added when absent); an unknown or repeated
    defence is an InputError naming the known ones."""
    defences: list[Defence] = []
    seen: dict[str | None, str] = {}
    for label in (part.strip() for part in text.split(",")):
        if not label:
            continue
        try:
            normalize = None if label == NONE else canonical(label)
        except ValueError as exc:
            raise InputError(str(exc), field="--defences") from None
        if normalize in seen:
            raise InputError(f"{label!r} is the same defence as {seen[normalize]!r}", field="--defences")
        seen[normalize] = label
        defences.append(Defence(label if "+" not in label else (normalize or label), normalize))
    if not defences:
        raise InputError("name at least one defence", field="--defences")
    baseline = next((d for d in defences if d.normalize is None), Defence(BASELINE, None))
    return [baseline, *(d for d in defences if d.normalize is not None)]


def prepare_ablation(config: RunConfig, defences: Iterable[Defence]) -> list[tuple[Defence, PreparedRun]]:
    """Validate everything and build the candidates once; one prepared run per defence."""
    if not strategy(config.search).from_suite:
        raise InputError("an ablation compares defences on the fixed suite; adaptive costs are upper bounds "
                         "that depend on the guard's own answers", field="--search")
    spec = config.guard_spec()
    if spec.normalize is not None:
        raise InputError(f"the guard already runs behind {spec.normalize}; ablate puts each of --defences "
                         "in front of the bare guard", field="--guard")
    if spec.replicas < 1:
        raise InputError("must be at least 1", field="--replicas")
    check_call_timeout(config, is_remote(spec))
    shared = prepare_inputs(config)
    spec = served_spec(spec)  # a guard behind a server: what it serves is part of its identity
    prepared = []
    for defence in defences:
        defended = spec.model_copy(update={"normalize": defence.normalize})
        run_config = dataclasses.replace(config, guard=defended, normalize=None)
        prepared.append((defence, dataclasses.replace(shared, config=run_config, spec=defended,
                                                      info=describe_guard(defended))))
    return prepared


def decoded_calls(prepared: PreparedRun, calls: Iterable[CallLine], normalize: str | None) -> int:
    """Texts `decode` adds for every candidate the run asked about (the same whatever was
    cached or retried): each decoded text is one more guard call in deployment."""
    if normalize is None or "decode" not in steps_of(normalize):
        return 0
    seed = prepared.config.seed
    texts = {(c.prompt_id, c.transform, c.strength, c.seed): c.text
             for p in prepared.prompts for c in prepared.all_candidates(p)}
    texts.update({(p.id, None, None, seed): original_candidate(p, seed).text for p in prepared.prompts})
    asked = {call.key for call in calls}
    return sum(len(guard_texts(texts[key], normalize)) - 1 for key in asked if key in texts)


@dataclass
class AblationOutcome:
    out_dir: Path
    record: Ablation  # ablation.json is its document()
    runs: list[DefenceRun]
    outcomes: list[RunOutcome]
    files: list[Path]


Execute = Callable[[PreparedRun, Path, bool], RunOutcome]  # (run, its folder, resume it)


def check_ablation_dir(prepared: list[tuple[Defence, PreparedRun]], out_dir: Path) -> None:
    """--resume: refuse, before any defence starts, a folder that is not an ablation of these
    defences, or one whose defence ran with other options (each checked as `margin run --resume`)."""
    if not out_dir.is_dir():
        raise InputError("no such ablation folder to resume (an ablation stopped before it recorded anything "
                         "leaves none: start it again with --out)", path=out_dir, field="--resume")
    if (out_dir / "run.json").is_file():
        raise InputError("not an ablation folder but one run's (resume that with margin run --resume)",
                         path=out_dir, field="--resume")
    labels = {defence.label for defence, _ in prepared}
    for entry in sorted(entries(out_dir)):
        if entry.name in END_FILES or any(entry.name.startswith(f".{name}.") for name in END_FILES):
            continue
        if entry.name not in labels and entry.is_dir() and (entry / "run.json").is_file():
            raise InputError(f"cannot resume: it holds a run of the defence {entry.name!r}, not in --defences "
                             f"({', '.join(sorted(labels))})", path=out_dir, field="--defences")
        if entry.name not in labels or not entry.is_dir():
            raise InputError(f"not an ablation folder to resume ({entry.name!r} is no defence's run folder)",
                             path=out_dir, field="--resume")
    for defence, run in prepared:
        if (out_dir / defence.label).is_dir():
            check_run_dir(run, out_dir / defence.label, True)


def run_ablation(prepared: list[tuple[Defence, PreparedRun]], out_dir: Path, *,
                 families: Mapping[str, str], execute_one: Execute | None = None, resume: bool = False,
                 on_start: Callable[[Defence, int, int], None] = lambda *_: None) -> AblationOutcome:
    """`resume`: continue a killed ablation in `out_dir` (every defence's run resumed or started).
    The folder is locked throughout (`margin.util.folderlock`): a second writer is refused."""
    check = (lambda: check_ablation_dir(prepared, out_dir)) if resume else (lambda: check_out_dir(out_dir))
    if not out_dir.is_dir():  # a --resume of no folder fails here, and no folder is made for it
        check()
    with hold(out_dir, what="ablation folder"):
        check()  # again, now that no one else writes it
        return _run_ablation(prepared, out_dir, families=families, execute_one=execute_one, resume=resume,
                             on_start=on_start)


def _run_ablation(prepared: list[tuple[Defence, PreparedRun]], out_dir: Path, *, families: Mapping[str, str],
                  execute_one: Execute | None, resume: bool, on_start: Callable[[Defence, int, int], None]
                  ) -> AblationOutcome:
    run_one: Execute = execute_one or (lambda p, d, again: execute(p, d, resume=again))
    runs: list[DefenceRun] = []
    outcomes: list[RunOutcome] = []
    for index, (defence, run) in enumerate(prepared):
        on_start(defence, index, len(prepared))
        folder = out_dir / safe_name(defence.label)  # a defence's canonical name, checked as any path part
        outcome = run_one(run, folder, resume and folder.is_dir())
        calls = read_calls(read_jsonl(folder / "receipts.jsonl"))
        exhaustive = run.strategy.observes_all
        runs.append(DefenceRun(
            defence=defence.label, normalize=defence.normalize, run_dir=defence.label,
            record=outcome.snapshot.data[0], results=outcome.results,
            effects=effectiveness(from_receipts(calls, outcome.results), families) if exhaustive else None,
            guard_calls=sum(r.guard_calls for r in outcome.results),
            decoded_calls=decoded_calls(run, calls, defence.normalize)))
        outcomes.append(outcome)
    base = prepared[0][1]
    measured = provenance(base.record, len(base.prompts)).model_copy(
        update={"margin_version": margin_version(), "git_commit": git_commit()})
    record = ablation_record(runs, base.config.budget, families, {p.id: p.text for p in base.prompts}, measured)
    atomic_write_text(out_dir / "ablation.json", dumps(record.document()) + "\n")
    return AblationOutcome(out_dir, record, runs, outcomes, [out_dir / "ablation.json", *write_figures(out_dir, record)])


def write_figures(out_dir: Path, record: Ablation) -> list[Path]:
    """ablation.png/.svg (margins and changes with intervals) and, for exhaustive runs,
    ablation-families.png/.svg (flip rate per family and defence)."""
    defences, meta = record.defences, record.meta
    title = f"{meta.guard} on {meta.dataset.name} ({meta.suite.name} suite)"
    files = save(ablation_figure(defences, title), out_dir / "ablation")
    rates = [d.family_flip_rates() for d in defences]
    if all(r is not None for r in rates):
        rows = list(rates[0] or {})
        values = [[(r or {}).get(name) for r in rates] for name in rows]
        files += save(heatmap_figure(rows, [d.defence for d in defences], values,
                                     f"{title}: flip rate per family"), out_dir / "ablation-families")
    return files
