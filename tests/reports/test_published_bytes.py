"""Every published byte, pinned: a run's snapshot and results, publish's leaderboard and
pairings, the site, every export format, and `report`, `diff` and `check` as JSON, over fixed
runs (complete, exhaustive, with a missing prompt) and pairings (complete and not).

The reports code may be rewritten freely underneath (dicts to models, one coverage pass);
these hashes say that not one byte of what it writes moved. margin's version, its commit and
today's date are the only inputs that vary between checkouts and days: they are pinned here.
A deliberate change to a published format updates a hash here, and says so in its commit.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import sys
from pathlib import Path

import click
import pytest

from margin.datasets import load_dataset
from margin.reports.completeness import PairCoverage
from margin.reports.pairings import PairOutcome, TransformationOutcome, build_pairings
from margin.reports.publish import publish
from margin.reports.snapshot import build_snapshot, snapshot_entry
from margin.reports.snapshot_schema import Evaluation, Provenance
from margin.util import provenance
from margin.util.hashing import sha256_text
from tests.support.guards import FlakyGuard, HashGuard, ProbabilityGuard
from tests.support.runs import make_run

DAY = dt.date(2026, 9, 30)
TODAY = dt.datetime.now(dt.UTC).date().isoformat()  # a run's own snapshot is dated the day it ran
FORMATS = ("inspect", "garak", "jbb", "sarif", "junit")


@contextlib.contextmanager
def pinned_inputs(cache: Path):
    """margin_version and git_commit fixed wherever they were imported (and for later imports),
    and a verdict cache of the runs' own."""
    fixed = {"margin_version": lambda: "0.0.0+pinned", "git_commit": lambda: "c0ffee"}
    originals = {name: getattr(provenance, name) for name in fixed}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MARGIN_CACHE_DIR", str(cache))  # a fresh cache: no run is answered from another's verdicts
        for module in list(sys.modules.values()):
            for name, replacement in fixed.items():
                if module is not None and vars(module).get(name) is originals[name]:
                    patch.setattr(module, name, replacement)
        yield


def printed(command, *args, **kwargs) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(click.exceptions.Exit):  # check's exit 1
        command(*args, **kwargs)
    return out.getvalue()


def pairings_document(coverage: bool) -> dict:
    guards = [{"id": "kw", "name": "keyword"}, {"id": "mini", "name": "MiniLM"}]
    models = [{"id": "small", "name": "Small 1B", "parameters_b": 1.0, "capability_index": 6},
              {"id": "big", "name": "Big 30B", "parameters_b": 30.0, "capability_index": 15}]
    short = PairCoverage.of({"guard_verdicts": 48, "responses": 48, "judge_outputs": 48},
                            {"responses": 3}, "model small: timeout") if coverage else None
    pairs = [PairOutcome("kw", "small", (TransformationOutcome("homoglyph", 0.99, 0.01, 0.40),), short),
             PairOutcome("kw", "big", (TransformationOutcome("homoglyph", 0.98, 0.0, 0.8),
                                       TransformationOutcome("roleplay", 0.5, 0.0, 0.9,
                                                             {"counts": {"original_missing": 1}})))]
    if coverage:
        pairs.append(PairOutcome("mini", "big", (TransformationOutcome("zwsp", 0.97, 0.02, 0.5),),
                                 PairCoverage.of({"guard_verdicts": 48, "responses": 48, "judge_outputs": 48}, {},
                                                 None)))
    return build_pairings(pairs, judge={"model": "judge-1", "rubric_sha256": "abc"}, guards=guards,
                          models=models, date=DAY).document()


def written(root: Path) -> dict[str, str]:
    """Every document the reports code writes for the fixed inputs, by a name that says which."""
    from margin.cli.diff import check, diff
    from margin.cli.report import report
    from margin.reports.exports.write import export_run
    from margin.site.build import site_files
    from margin.site.inputs import load_publish_dir

    lost = next(q for q in load_dataset("sample").prompts if q.label == "unsafe")
    runs = {"hash": make_run(root / "hash", HashGuard(0.5, salt="p")),
            "prob": make_run(root / "prob", ProbabilityGuard(), search="exhaustive"),
            "lost": make_run(root / "lost", FlakyGuard(HashGuard(0.9, salt="-0.9"), fail_every=0,
                                                       drop_text=lost.text), attempts=1)}
    out: dict[str, str] = {}
    for name, run in runs.items():
        for file in ("snapshot.json", "results.jsonl", "run.json"):
            out[f"run/{name}/{file}"] = (run / file).read_text(encoding="utf-8")
        out[f"report/{name}"] = printed(report, run, flips=10, as_json=True)
        for fmt in FORMATS:
            target = root / "exports" / f"{name}.{fmt}.{'jsonl' if fmt == 'garak' else 'json' if fmt != 'junit' else 'xml'}"
            out[f"export/{name}/{fmt}"] = export_run(run, fmt, target).path.read_text(encoding="utf-8")
    studies = []
    for name, coverage in (("old", False), ("new", True)):
        (root / name).mkdir()
        (root / name / "pairings.json").write_text(json.dumps(pairings_document(coverage)))
        studies.append(root / name)
    pub = root / "pub"
    publish([runs["hash"], runs["prob"]], pub, date=dt.date(2026, 9, 1), plots=False)
    publish([*runs.values(), *studies], pub, date=DAY, plots=False, allow_incomplete=True,
            base_url="https://example.org/snapshots/")
    for path in sorted(pub.iterdir()):
        out[f"publish/{path.name}"] = path.read_text(encoding="utf-8")
    for path, text in site_files(load_publish_dir(pub), "https://example.org/margin").items():
        out[f"site/{path}"] = text
    current = pub / "guardrails.json"
    out["diff/runs"] = printed(diff, runs["hash"], runs["prob"], as_json=True)
    out["diff/run-snapshot"] = printed(diff, runs["prob"], current, as_json=True)
    out["check/runs"] = printed(check, runs["prob"], baseline=runs["hash"], max_drop=1.0, as_json=True)
    adaptive = snapshot_entry(HashGuard(0.5, salt="p").info, [], 100.0, Evaluation(search="adaptive", seed=0))
    out["snapshot/adaptive-empty"] = json.dumps(build_snapshot(
        [adaptive], Provenance.model_validate({"dataset": {"name": "d", "sha256": "1"}, "suite": {"name": "s", "sha256": "2"},
                                               "budget": 100}),
        DAY, protocol="margin-adaptive-flip-cost/1", min_coverage=0.5).document())
    return {name: text.replace(TODAY, "TODAY").replace(str(root), "ROOT") for name, text in out.items()}


@pytest.fixture(scope="module")
def documents(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("bytes")
    with pinned_inputs(root / "cache"):
        return written(root)


def digests(documents: dict[str, str]) -> dict[str, str]:
    return {name: sha256_text(text)[:16] for name, text in sorted(documents.items())}


EXPECTED: dict[str, str] = {
    "check/runs": "38d57012b6fabd07",
    "diff/run-snapshot": "5447f9b8159760b8",
    "diff/runs": "ee7ccb64baf236cd",
    "export/hash/garak": "c12a28d693f00688",
    "export/hash/inspect": "80593e32a2d2ab5b",
    "export/hash/jbb": "e57d9841fb0919c3",
    "export/hash/junit": "4b088eb012a96c57",
    "export/hash/sarif": "797f76ea7b6dceef",
    "export/lost/garak": "5f4a78f77c079711",
    "export/lost/inspect": "e7eef800e666ffb3",
    "export/lost/jbb": "bc61cd0d3d7edf0a",
    "export/lost/junit": "9fb77026be4f0940",
    "export/lost/sarif": "f0e04623b1eae0d4",
    "export/prob/garak": "11b11f5dc1ee4c3b",
    "export/prob/inspect": "dd0212865ed1114e",
    "export/prob/jbb": "2c3b330c374833a5",
    "export/prob/junit": "af39aa0004515a84",
    "export/prob/sarif": "bfaf5690f882cc16",
    "publish/guardrails.json": "3af2fb405f01b945",
    "publish/margin-guardrails-2026-09-01-727a57afd40a4493.json": "1deb617f99211bea",
    "publish/margin-guardrails-2026-09-30-b74e3aab124638ca.json": "3af2fb405f01b945",
    "publish/margin-pairings-2026-09-30-96ff4ca108da4fec.json": "7621a863dfe14a32",
    "publish/pairings.json": "7621a863dfe14a32",
    "report/hash": "e3761e9f6ee78171",
    "report/lost": "d36fbd21fb549aca",
    "report/prob": "6dee818e7eec07f2",
    "run/hash/results.jsonl": "546f9d9a06619a28",
    "run/hash/run.json": "64ca4ff4688e5edc",
    "run/hash/snapshot.json": "d2f1fbb9c99b708c",
    "run/lost/results.jsonl": "f82d8b2c729f16f5",
    "run/lost/run.json": "a62d0a563bf38ce2",
    "run/lost/snapshot.json": "6b886979fe3e1e1d",
    "run/prob/results.jsonl": "c77690171f305be4",
    "run/prob/run.json": "0e87f5a3bb4b2300",
    "run/prob/snapshot.json": "cf490fd8faf0430a",
    "site/.margin-site": "e99cd4aa61bfa082",
    "site/api/v1/margin/guardrails": "e1b941b5f689f944",
    "site/api/v1/margin/guardrails.json": "e1b941b5f689f944",
    "site/api/v1/margin/pairings": "6e3807cf1e772a5f",
    "site/api/v1/margin/pairings.json": "6e3807cf1e772a5f",
    "site/archive.html": "1c599e3871984ba1",
    "site/assets/site.css": "f782a8f2e1d2e7da",
    "site/assets/site.js": "da7ad936a049f9b1",
    "site/index.html": "81b425a5e7b94502",
    "site/margin-guardrails-2026-09-01-727a57afd40a4493.html": "35e8c5ff13fc6f8f",
    "site/margin-guardrails-2026-09-01-727a57afd40a4493.json": "1deb617f99211bea",
    "site/margin-guardrails-2026-09-30-b74e3aab124638ca.html": "e203799803aad2f1",
    "site/margin-guardrails-2026-09-30-b74e3aab124638ca.json": "3af2fb405f01b945",
    "site/margin-pairings-2026-09-30-96ff4ca108da4fec.html": "2dd15b7dc27ddba4",
    "site/margin-pairings-2026-09-30-96ff4ca108da4fec.json": "7621a863dfe14a32",
    "site/methodology.html": "1c77cb079f6b1247",
    "site/pairings.html": "d6cdb2a8508bfdd5",
    "snapshot/adaptive-empty": "e00e801283209c55",
}


def test_every_published_byte_is_what_it_was(documents):
    assert digests(documents) == EXPECTED


def test_publish_computes_each_runs_coverage_once_and_reads_its_receipts_at_most_once(tmp_path, monkeypatch):
    """A complete cheapest run's receipts are never read; a run with a missing prompt's, or an
    exhaustive run's, once: for the reason and the observations together."""
    from margin.reports.completeness import Coverage
    from margin.runfolder import RunDir

    monkeypatch.setenv("MARGIN_CACHE_DIR", str(tmp_path / "cache"))  # the dropped text is asked, never cached
    lost = next(q for q in load_dataset("sample").prompts if q.label == "unsafe")
    runs = {"hash": make_run(tmp_path / "hash", HashGuard(0.5, salt="p")),
            "prob": make_run(tmp_path / "prob", FlakyGuard(ProbabilityGuard(), fail_every=0, drop_text=lost.text),
                             search="exhaustive", attempts=1)}
    reads: dict[str, int] = dict.fromkeys(runs.values(), 0)
    computed: list[int] = []
    receipts, of = RunDir.receipts, Coverage.of.__func__  # type: ignore[attr-defined]

    def counted_receipts(self):
        reads[self.path] += 1
        return receipts(self)

    def counted_of(cls, results, reason):
        computed.append(len(results))
        return of(cls, results, reason)

    monkeypatch.setattr(RunDir, "receipts", counted_receipts)
    monkeypatch.setattr(Coverage, "of", classmethod(counted_of))
    published = publish(list(runs.values()), tmp_path / "pub", date=DAY, plots=False, min_coverage=0.9)
    assert published.leaderboard is not None and list(published.effectiveness) == ["prob"]
    assert published.leaderboard.record("prob").coverage.reason.startswith("prompt ")  # type: ignore[union-attr]
    assert reads == {runs["hash"]: 0, runs["prob"]: 1}
    assert len(computed) == len(runs)
