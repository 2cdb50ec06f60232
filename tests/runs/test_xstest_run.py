"""The foundation's acceptance check on the real XSTest file (skipped without a local copy: see the xstest_csv fixture)."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import margin

pytestmark = pytest.mark.usefixtures("ray_address")


def test_keyword_guard_completes_all_450_xstest_prompts(xstest_csv, tmp_path):
    out = tmp_path / "x"
    proc = margin("run", "--guard", "keyword", "--dataset", str(xstest_csv), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 450 and all(r["status"] == "scored" for r in results)
