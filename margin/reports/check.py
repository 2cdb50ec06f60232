"""`margin check`: a run against a baseline, as a CI gate.

It fails (exit 1) when a gated margin dropped significantly — the upper end of the interval
of (run − baseline) lies below −D, so even the most favourable reading of the resampling
noise leaves a drop larger than the tolerated D — or when the balanced margin is under the
floor M. The balanced margin is always gated; the class margins only with `per_class`, since
a defence that trades a little of one class for much of the other is often the point. Every
other figure is shown, never gated. Pure: a `diff.DiffDocument` comes in, a verdict goes out.
"""

from __future__ import annotations

from dataclasses import dataclass

from margin.reports.diff import DiffDocument, FigureChange

GATED = ("balanced_margin",)
CLASS_MARGINS = ("unsafe_margin", "safe_margin")


@dataclass(frozen=True)
class Finding:
    figure: str
    gated: bool
    failed: bool
    reason: str


@dataclass(frozen=True)
class CheckVerdict:
    passed: bool
    findings: tuple[Finding, ...]

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.failed]


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _change(row: FigureChange) -> str:
    interval = row.interval
    if row.difference is None or not interval:
        return "no difference (undefined on one side)"
    return f"{row.difference:+.2f} [{interval[0]:+.2f}, {interval[1]:+.2f}]"


def judge(document: DiffDocument, *, max_drop: float = 0.0, min_balanced: float | None = None,
          per_class: bool = False) -> CheckVerdict:
    """The gate's verdict over a diff document whose side A is the baseline and B the run."""
    gated = GATED + (CLASS_MARGINS if per_class else ())
    findings = []
    for name, row in document.figures.items():
        is_gated = name in gated
        interval = row.interval or []
        dropped = bool(interval) and interval[1] < -max_drop
        failed = is_gated and dropped
        if failed:
            reason = f"dropped: the whole interval lies below {'0' if max_drop == 0 else f'−{max_drop:g}'}"
        elif dropped:
            reason = "dropped (not gated)"
        elif interval and interval[0] > 0:
            reason = "rose"
        else:
            reason = "no significant drop" if is_gated else "no significant drop (not gated)"
        findings.append(Finding(name, is_gated, failed, reason))
    if min_balanced is not None:
        value = document.figures["balanced_margin"].b.value
        under = value is None or value < min_balanced
        findings.append(Finding("balanced_margin floor", True, under,
                                f"{_num(value)} {'<' if under else '≥'} floor {min_balanced:g}"))
    return CheckVerdict(not any(f.failed for f in findings), tuple(findings))


def explain(document: DiffDocument, verdict: CheckVerdict) -> list[str]:
    """One screen: what was compared, every figure's change and the reason, the verdict."""
    a, b = document.a, document.b
    lines = [f"run      {b.source} ({b.guard_id})",
             f"baseline {a.source} ({a.guard_id})",
             f"target   {document.target}: both sides judged the {document.target} turn",
             f"change = run − baseline, 95% interval: {document.method}"]
    for finding in verdict.findings:
        row = document.figures.get(finding.figure)
        mark = "FAIL" if finding.failed else "ok  " if finding.gated else "    "
        if row is None:
            lines.append(f"{mark} {finding.figure}: {finding.reason}")
            continue
        lines.append(f"{mark} {finding.figure}: {_num(row.a.value)} → {_num(row.b.value)}, "
                     f"change {_change(row)}: {finding.reason}")
    failed = [f.figure for f in verdict.failures]
    lines.append(f"FAILED: {', '.join(failed)}" if failed else "PASSED: no gated figure dropped significantly")
    return lines
