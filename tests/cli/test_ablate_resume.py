"""`margin ablate --out DIR --resume`: a killed ablation (one defence finished, one killed
mid-run, one not begun) ends exactly as an uninterrupted one, asking no recorded call again;
a folder that is no ablation of these defences, or of other options, is refused in one line."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from tests.support.cli import margin

ABLATE = ["ablate", "--guard", "keyword", "--suite", "quick", "--limit", "6", "--engine", "local", "--no-cache",
          "--defences", "none,nfkc,skeleton"]
DEFENCES = ("none", "nfkc", "skeleton")


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted ablation."""
    out = tmp_path_factory.mktemp("whole") / "ablation"
    proc = margin(*ABLATE, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def killed(whole: Path, out: Path) -> None:
    """`whole` as a kill would have left it: `none` finished, `nfkc` killed half way through
    its receipts (mid-line), `skeleton` not begun, nothing written at the end."""
    out.mkdir()
    shutil.copytree(whole / "none", out / "none")
    (out / "nfkc").mkdir()
    shutil.copy(whole / "nfkc" / "run.json", out / "nfkc" / "run.json")
    receipts = (whole / "nfkc" / "receipts.jsonl").read_bytes()
    lines = receipts.splitlines(keepends=True)
    (out / "nfkc" / "receipts.jsonl").write_bytes(b"".join(lines[: len(lines) // 2]) + lines[len(lines) // 2][:40])


def answered(folder: Path) -> Counter[str]:
    """Guard answers each text got (not from a cache)."""
    lines = map(json.loads, (folder / "receipts.jsonl").read_text().splitlines())
    return Counter(r["text_sha256"] for r in lines if r["kind"] == "call" and r["verdict"] is not None
                   and not r["cached"])


def test_a_killed_ablation_resumes_to_the_uninterrupted_ones_bytes(whole, tmp_path):
    out = tmp_path / "ablation"
    killed(whole, out)
    proc = margin(*ABLATE, "--out", str(out), "--resume")
    assert proc.returncode == 0, proc.stderr
    assert (out / "ablation.json").read_bytes() == (whole / "ablation.json").read_bytes()
    for defence in DEFENCES:
        assert (out / defence / "results.jsonl").read_bytes() == (whole / defence / "results.jsonl").read_bytes()
        assert max(answered(out / defence).values()) == 1  # no recorded answer was asked for again
    # The finished defence was replayed: not one call made, not one receipt added.
    assert (out / "none" / "receipts.jsonl").read_bytes() == (whole / "none" / "receipts.jsonl").read_bytes()


def refusal(*args: str, cwd: Path | None = None) -> str:
    proc = margin(*args, cwd=cwd)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    return line


@pytest.mark.slow  # six margin processes, each refused
def test_resume_needs_an_ablation_folder_of_the_same_options(whole, tmp_path):
    assert refusal(*ABLATE, "--resume") == (
        "error: --resume: needs --out, the folder of the ablation to continue")
    assert "no such ablation folder to resume" in refusal(*ABLATE, "--out", str(tmp_path / "nothing"), "--resume")
    run_folder = refusal(*ABLATE, "--out", str(whole / "none"), "--resume")
    assert run_folder.startswith(f"error: {whole / 'none'} [--resume]: not an ablation folder but one run's")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine\n")
    assert "not an ablation folder to resume ('notes.txt'" in refusal(*ABLATE, "--out", str(tmp_path / "other"),
                                                                      "--resume")
    out = tmp_path / "ablation"
    killed(whole, out)
    before = sorted(p.name for p in out.rglob("*"))
    fewer = refusal(*ABLATE[:-1], "none,nfkc", "--out", str(whole), "--resume")
    assert fewer.startswith(f"error: {whole} [--defences]: cannot resume: it holds a run of the defence 'skeleton'")
    seed = refusal(*ABLATE, "--seed", "3", "--out", str(out), "--resume")
    assert seed.startswith(f"error: {out / 'none' / 'run.json'}: cannot resume: --seed changed")
    assert sorted(p.name for p in out.rglob("*")) == before  # nothing started, nothing written
