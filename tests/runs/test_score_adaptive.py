"""`margin score` replays adaptive runs too: their candidates are rebuilt as the search asks."""

from __future__ import annotations

from tests.support.cli import margin


def test_rescoring_an_adaptive_run_reproduces_it(tmp_path, ray_address):  # the default engine: Ray
    run = tmp_path / "ada"
    proc = margin("run", "--guard", "keyword", "--search", "adaptive", "--limit", "10", "--out", str(run))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "rescored"
    proc = margin("score", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "match" in proc.stdout and "differ" not in proc.stdout
    assert (out / "results.jsonl").read_bytes() == (run / "results.jsonl").read_bytes()
