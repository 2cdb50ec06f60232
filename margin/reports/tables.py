"""Rich tables for `margin report`, `margin score` and `margin publish`.

Every builder reads the models a JSON file is written from (a snapshot record, the analyses,
the ablation, results), so a table shows exactly those numbers. Intervals print as `value [low, high]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table

from margin.reports.ablation import Ablation, Change, DefenceRecord
from margin.reports.analyses import Analyses
from margin.reports.documents import Open
from margin.reports.effectiveness import Effectiveness
from margin.reports.invariance import Invariance
from margin.reports.metrics import ONE_EDIT_TAG
from margin.reports.observations import CallCoverage
from margin.reports.snapshot_schema import FigureSet, Record, Snapshot
from margin.reports.sweep import Sweep
from margin.types import HEADLINE_FIGURES, LABELS, SearchResult
from margin.util.display import make_visible

HEADLINE = (
    ("balanced_margin", "balanced margin"),
    ("unsafe_margin", "unsafe margin (false allows)"),
    ("safe_margin", "safe margin (false blocks)"),
    ("clean_balanced_accuracy", "clean balanced accuracy %"),
    ("clean_unsafe_accuracy", "clean accuracy, unsafe %"),
    ("clean_safe_accuracy", "clean accuracy, safe %"),
)


def fmt(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def share(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def with_ci(value: float | None, interval: Sequence[float] | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    if interval is None:
        return fmt(value, digits)
    return f"{value:.{digits}f} [{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"


def margins_table(record: Record, title: str = "") -> Table:
    """One guard's headline figures with their 95% intervals."""
    cov = record.coverage
    mark = "" if cov.is_complete() else f" — [bold red]INCOMPLETE[/bold red]: {escape(cov.describe())}"
    table = Table(title=(title or f"margin — {escape(record.id)}") + mark)
    table.add_column("figure")
    table.add_column("value [95% CI]", justify="right")
    for name, label in HEADLINE:
        table.add_row(label, with_ci(record.figure(name), record.interval(name)))
    scored, missing, invalid = cov.scored, cov.missing, cov.invalid or {}
    total = cov.totals()
    table.add_row("prompts (unsafe / safe)", f"{total.get('unsafe', 0)} / {total.get('safe', 0)}")
    table.add_row("prompts scored (unsafe / safe)", f"{scored.get('unsafe', 0)} / {scored.get('safe', 0)}")
    table.add_row("prompts missing (unsafe / safe)", f"{missing.get('unsafe', 0)} / {missing.get('safe', 0)}")
    table.add_row("decided by an invalid output (unsafe / safe)", f"{invalid.get('unsafe', 0)} / {invalid.get('safe', 0)}")
    evaluation = record.evaluation
    target = getattr(evaluation, "target", None)  # a response run: its cases, costs and margins are its responses'
    if target:
        table.add_row("target", f"{escape(str(target))} (costs per 100 characters of the target turns)")
    if evaluation.scope:
        table.add_row("scope", escape(str(evaluation.scope)))
    for caveat in evaluation.caveats:
        table.add_row("caveat", escape(str(caveat)))
    return table


def leaderboard_table(snapshot: Snapshot, title: str = "leaderboard") -> Table:
    table = Table(title=title)
    for column in ("rank", "guard", "balanced", "unsafe", "safe", "clean bal. acc. %"):
        table.add_column(column, justify="left" if column == "guard" else "right")
    for r in snapshot.data:
        cov = r.coverage
        name = escape(r.id) + ("" if cov.is_complete() else f" [red](incomplete: {escape(cov.scored_of_total())})[/red]")
        table.add_row("—" if r.rank is None else str(r.rank), name,
                      *(with_ci(r.figure(n), r.interval(n)) for n in HEADLINE_FIGURES))
    return table


def slices_table(dimension: str, slices: Mapping[str, FigureSet]) -> Table:
    """Every figure per slice value (a type, or a tag column's value)."""
    table = Table(title=f"slices by {dimension}")
    for column in ("slice", "n unsafe/safe", "unsafe margin", "safe margin", "balanced", "clean acc. %"):
        table.add_column(column, justify="left" if column == "slice" else "right")
    for value, r in slices.items():
        n = r.coverage.scored if r.coverage is not None else {}
        clean = r.clean_balanced_accuracy
        clean_text = with_ci(clean, r.interval("clean_balanced_accuracy"), 1) if clean is not None else " / ".join(
            with_ci(r.figure(f"clean_{label}_accuracy"), r.interval(f"clean_{label}_accuracy"), 1)
            for label in LABELS if r.figure(f"clean_{label}_accuracy") is not None)
        table.add_row(value, f"{n.get('unsafe', 0)}/{n.get('safe', 0)}",
                      with_ci(r.unsafe_margin, r.interval("unsafe_margin")),
                      with_ci(r.safe_margin, r.interval("safe_margin")),
                      with_ci(r.balanced_margin, r.interval("balanced_margin")), clean_text)
    return table


class Tally(Open):
    """Attempted against valid: asked, answered safe or unsafe, answered invalid, no output.
    Candidates also count, where any, valid verdicts without p_unsafe and those the threshold
    decided against the reply's text (unset otherwise: `margin report --json` leaves them out)."""

    attempted: int
    valid: int
    invalid: int
    no_output: int
    without_p_unsafe: int | None = None
    against_reply: int | None = None


class GuardCalls(Open):
    attempts: int  # sent to the guard
    failed_attempts: int  # ... that produced no output (retried)
    cache_hits: int


class CoverageFigures(Open):
    """The coverage table's figures: prompts per class, then (with receipts) candidates and calls."""

    prompts: dict[str, Tally]
    candidates: Tally | None = None
    guard_calls: GuardCalls | None = None


def coverage_record(results: Sequence[SearchResult], coverage: CallCoverage | None) -> CoverageFigures:
    """The coverage table's figures; `document()` is `margin report --json`'s `coverage`."""
    prompts: dict[str, Tally] = {}
    for label in LABELS:
        rs = [r for r in results if r.label == label]
        scored = [r for r in rs if r.status == "scored"]
        prompts[label] = Tally(attempted=len(rs), valid=sum(r.clean_verdict in LABELS for r in scored),
                               invalid=sum(r.clean_verdict == "invalid" for r in scored),
                               no_output=sum(r.status == "missing" for r in rs))
    if coverage is None:
        return CoverageFigures(prompts=prompts)
    scores = {name: count for name, count in (("without_p_unsafe", coverage.unscored),
                                              ("against_reply", coverage.contradicted)) if count}
    return CoverageFigures(
        prompts=prompts,
        candidates=Tally(attempted=coverage.candidates, valid=coverage.valid, invalid=coverage.invalid,
                         no_output=coverage.no_output, **scores),
        guard_calls=GuardCalls(attempts=coverage.attempts, failed_attempts=coverage.failed_attempts,
                               cache_hits=coverage.cache_hits))


#: The rows of valid candidates whose score is unknown or disagrees with the reply, where any.
SCORE_ROWS = (("without_p_unsafe", "candidates without p_unsafe (no logprobs held every decision label)"),
              ("against_reply", "candidates the threshold decided against the reply's text"))


def coverage_table(results: Sequence[SearchResult], coverage: CallCoverage | None) -> Table:
    """Attempted against valid: prompts per class, then candidates and raw guard calls."""
    figures = coverage_record(results, coverage)
    table = Table(title="coverage")
    table.add_column("what")
    table.add_column("attempted", justify="right")
    table.add_column("valid", justify="right")
    table.add_column("invalid", justify="right")
    table.add_column("no output", justify="right")
    for label, t in figures.prompts.items():
        table.add_row(f"{label} prompts", str(t.attempted), str(t.valid), str(t.invalid), str(t.no_output))
    candidates, calls = figures.candidates, figures.guard_calls
    if candidates is not None and calls is not None:
        table.add_row("candidates (distinct, originals included)", str(candidates.attempted), str(candidates.valid),
                      str(candidates.invalid), str(candidates.no_output))
        table.add_row(f"guard call attempts (+{calls.cache_hits} cache hits)", str(calls.attempts),
                      str(calls.attempts - calls.failed_attempts), "", str(calls.failed_attempts))
        for name, what in SCORE_ROWS:
            count = getattr(candidates, name)
            if count:
                table.add_row(what, "", str(count), "", "")
    return table


def cheapest_flips(results: Sequence[SearchResult], limit: int = 10) -> list[SearchResult]:
    """The cheapest flips found by a transform, cheapest first (ties by prompt id)."""
    flips = [r for r in results if r.flip is not None]
    return sorted(flips, key=lambda r: (r.flip_cost, r.prompt_id))[:limit]  # type: ignore[arg-type,return-value]


def flips_table(results: Sequence[SearchResult], limit: int = 10) -> Table:
    """The cheapest flips found, invisible characters shown as <U+XXXX>."""
    flipped = sum(1 for r in results if r.flip is not None)
    wrong = sum(1 for r in results if r.status == "scored" and r.flip_cost == 0)
    table = Table(title=f"cheapest flips ({flipped} flipped by a transform, {wrong} wrong on the original)")
    for column in ("prompt", "label", "cost", "transform (strength)", "verdict", "transformed text"):
        table.add_column(column, justify="right" if column == "cost" else "left",
                         overflow="fold" if column == "transformed text" else "ellipsis")
    for r in cheapest_flips(results, limit):
        f = r.flip
        assert f is not None
        table.add_row(r.prompt_id, r.label, f"{f.cost:.2f}", f"{f.transform} ({f.strength})", f.verdict,
                      make_visible(f.text))
    return table



def one_edit_table(results: Sequence[SearchResult]) -> Table | None:
    """Adaptive runs: per prompt the guard got right, whether its cost is certified minimal
    among one-edit flips or only an upper bound (None when no result says)."""
    rows = [r for r in results if ONE_EDIT_TAG in dict(r.extra) and r.flip_cost != 0]
    if not rows:
        return None
    minimal = sum(1 for r in rows if dict(r.extra)[ONE_EDIT_TAG] == "minimal")
    table = Table(title=f"one-edit bound ({minimal} of {len(rows)} costs certified minimal among one-edit flips, "
                        f"{len(rows) - minimal} upper bounds only)")
    for column in ("prompt", "label", "cost", "one-edit bound", "guard calls"):
        table.add_column(column, justify="right" if column in ("cost", "guard calls") else "left")
    for r in rows:
        bound = "minimal" if dict(r.extra)[ONE_EDIT_TAG] == "minimal" else "upper bound"
        table.add_row(r.prompt_id, r.label, fmt(r.flip_cost), bound, str(r.guard_calls))
    return table


def invariance_table(invariance: Invariance, level: str = "transforms") -> Table:
    table = Table(title=f"invariance per {_singular(level)} (no gold labels; fired = share read unsafe)")
    for column in ("transform" if level == "transforms" else "family", "prompts", "changed", "lost", "gained",
                   "candidates changed", "fired"):
        table.add_column(column, justify="left" if column in ("transform", "family") else "right")
    rows = [invariance.original, *invariance.transforms] if level == "transforms" else invariance.families
    for r in rows:
        table.add_row(r.name, str(r.prompts), share(r.change_rate), str(r.lost), str(r.gained),
                      share(r.candidate_change_rate), share(r.fired_rate))
    return table


def effectiveness_table(effectiveness: Effectiveness, level: str = "transforms") -> Table:
    table = Table(title=f"effectiveness per {_singular(level)}: flip rate (median flip cost) among prompts right originally")
    table.add_column("transform" if level == "transforms" else "family")
    for label in (*LABELS, "all"):
        table.add_column(label, justify="right")
    for r in effectiveness.transforms if level == "transforms" else effectiveness.families:
        cells = []
        for label in (*LABELS, "all"):
            e = r.by_class[label]
            cells.append("—" if e.flip_rate is None else f"{share(e.flip_rate)} ({fmt(e.median_cost)}) of {e.eligible}")
        table.add_row(r.name, *cells)
    return table


def sweep_table(sweep: Sweep) -> Table:
    ap = sweep.originals
    table = Table(title=f"threshold sweep (unsafe when p_unsafe >= t); average precision on originals "
                        f"{fmt(ap.average_precision, 3)} over {ap.scored} scored")
    for column in ("t", "balanced", "unsafe", "safe", "clean bal. acc. %"):
        table.add_column(column, justify="right")
    for point in sweep.points:
        f = point.figures
        table.add_row(f"{point.threshold:.2f}", *(with_ci(f.point(n), f.interval(n)) for n in HEADLINE_FIGURES))
    return table


def integral_table(scores: Sequence[Any], datasets: Sequence[str], groups: Sequence[str], at_budget: float) -> Table:
    title = "integral score" + (" on original prompts" if at_budget == 0 else f" at budget {at_budget:g}")
    table = Table(title=title)
    table.add_column("guard")
    for name in datasets:
        table.add_column(f"S {name}", justify="right")
    for name in groups:
        table.add_column(f"group {name}", justify="right")
    for column in ("integral", "FPR avg", "FNR avg"):
        table.add_column(column, justify="right")
    for s in scores:
        table.add_row(s.guard_id, *(fmt(s.datasets.get(d), 3) for d in datasets),
                      *(fmt(s.groups.get(g), 3) for g in groups), fmt(s.overall, 3), fmt(s.fpr_avg, 3),
                      fmt(s.fnr_avg, 3))
    return table


def run_tables(record: Record, results: Sequence[SearchResult], coverage: CallCoverage | None,
               analyses: Analyses, *, flips: int = 10) -> list[Table]:
    """Everything `margin report` shows for one run, in reading order."""
    tables = [margins_table(record)]
    tables += [slices_table(dimension, values) for dimension, values in record.slices.items()]
    tables += [coverage_table(results, coverage), flips_table(results, flips)]
    bound = one_edit_table(results)
    if bound is not None:
        tables.append(bound)
    if analyses.invariance is not None:
        tables += [invariance_table(analyses.invariance), invariance_table(analyses.invariance, "families")]
    if analyses.effectiveness is not None:
        tables += [effectiveness_table(analyses.effectiveness), effectiveness_table(analyses.effectiveness, "families")]
    if analyses.sweep is not None:
        tables.append(sweep_table(analyses.sweep))
    return tables


def _singular(level: str) -> str:
    return {"transforms": "transform", "families": "family"}[level]


ABLATION_COLUMNS = (("balanced_margin", "balanced"), ("unsafe_margin", "unsafe"), ("safe_margin", "safe"),
                    ("clean_balanced_accuracy", "clean bal. acc. %"))


def change_cell(change: Change | None) -> str:
    """`+1.23 [0.40, 2.10] *`: the change with its paired interval, starred when it leaves out 0."""
    if change is None:
        return "—"
    low, high = change.interval
    return f"{change.difference:+.2f} [{low:+.2f}, {high:+.2f}]" + (" *" if change.moves else "")


def ablation_margins_table(guard: str, defences: Sequence[DefenceRecord]) -> Table:
    table = Table(title=escape(f"defence ablation: {guard} (value [95% CI]; change against "
                               "none [paired 95% CI], * where it leaves out 0)"))
    table.add_column("defence", no_wrap=True)
    for _, name in ABLATION_COLUMNS:
        table.add_column(name, justify="right")
        table.add_column("change", justify="right")
    table.add_column("guard calls (+decoded)", justify="right")
    for d in defences:
        cells = []
        for figure, _ in ABLATION_COLUMNS:
            f = d.figures[figure]
            cells += [with_ci(f.value, f.interval), "" if d.change is None else change_cell(d.change[figure])]
        calls = f"{d.guard_calls:,}" + (f" (+{d.decoded_calls:,})" if d.decoded_calls else "")
        name = d.defence + ("" if d.coverage.is_complete() else f" (incomplete: {d.coverage.scored_of_total()})")
        table.add_row(escape(name), *cells, calls)
    return table


def ablation_families_table(defences: Sequence[DefenceRecord]) -> Table:
    """Flip rate per family (all prompts right originally) under each defence."""
    table = Table(title="flip rate per family: flipped / prompts right originally (closed: flips under none, none now)")
    table.add_column("family", no_wrap=True)
    for d in defences:
        table.add_column(d.defence, justify="right")
    by_defence = [{r.name: r for r in d.effectiveness.families} if d.effectiveness else {} for d in defences]
    for name in by_defence[0]:
        cells = []
        for rows in by_defence:
            r = rows.get(name)
            if r is None or r.all.flip_rate is None:
                cells.append("—")
                continue
            mark = {"closed": " closed", "opened": " opened"}.get(r.status, "")
            cells.append(f"{r.all.flipped}/{r.all.eligible}{mark}")
        table.add_row(name, *cells)
    return table


def ablation_clean_table(defences: Sequence[DefenceRecord], top: int = 3) -> Table:
    table = Table(title="what else changes: clean verdicts against none, and where each prompt's cheapest flip now comes from")
    for column in ("defence", "safe now blocked", "unsafe now allowed", "errors mended",
                   "cheapest unsafe flips", "cheapest safe flips"):
        table.add_column(column, justify="left" if column in ("defence",) or column.startswith("cheapest") else "right")
    for d in defences:
        clean = d.clean
        counts = ["", "", ""] if clean is None else [
            str(len(rows)) for rows in (clean.false_blocks_added, clean.false_allows_added, clean.errors_fixed)]
        flips = [", ".join(f"{name} {n}" for name, n in list(d.cheapest_flips[label].items())[:top])
                 for label in LABELS]
        table.add_row(d.defence, *counts, *flips)
    return table


def ablation_tables(ablation: Ablation) -> list[Table]:
    defences = ablation.defences
    tables = [ablation_margins_table(ablation.meta.guard, defences)]
    if all(d.effectiveness for d in defences):
        tables.append(ablation_families_table(defences))
    tables.append(ablation_clean_table(defences))
    return tables
