"""Two writers on one folder, and links in a run folder (issue 34, items 1 and 2): a run or
--resume of a folder another process writes is refused in one line naming it and its files
are left as they were; a lock a dead process left is taken over; a resumed run never cuts
or appends to a file outside its folder through a link."""

from __future__ import annotations

import os
import socket

from margin.util.folderlock import LOCK_NAME, hold
from tests.cli.test_cli_errors import QUICK, few_lines
from tests.support.cli import margin


def first_runs_start(out):
    """What a run writes before its first receipt line: the state a second start used to
    take for a killed start and delete."""
    (out / "run.json").write_text('{"dataset": {}}\n')
    (out / "receipts.jsonl").write_text("")
    return {p.name: p.read_bytes() for p in out.iterdir() if p.name != LOCK_NAME}


def test_a_second_run_on_a_folder_being_written_is_refused_and_keeps_its_files(tmp_path):
    out = tmp_path / "run"
    with hold(out, what="run folder"):  # the first run, still going
        before = first_runs_start(out)
        for flag in ("--out", "--resume"):
            proc = margin("run", "--guard", "keyword", *QUICK, flag, str(out))
            assert proc.returncode == 2, proc.stderr
            (line,) = few_lines(proc, 1)
            assert "another margin process writes this run folder" in line, line
            assert f"pid {os.getpid()} on {socket.gethostname()}" in line and str(out) in line
            assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != LOCK_NAME} == before


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text(f"pid 4194304 on {socket.gethostname()} since 2026-12-04T00:00:00Z\n")
    first_runs_start(out)  # killed before its first receipt line
    proc = margin("run", "--guard", "keyword", *QUICK, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "curves.png", "curves.svg", "receipts.jsonl", "results.jsonl", "run.json", "snapshot.json"]


def test_a_linked_receipts_file_is_refused_on_resume_and_its_target_untouched(tmp_path):
    out = tmp_path / "run"
    assert margin("run", "--guard", "keyword", *QUICK, "--out", str(out)).returncode == 0
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes((out / "receipts.jsonl").read_bytes() + b'{"torn": ')  # a torn last line resume would cut
    before = outside.read_bytes()
    (out / "receipts.jsonl").unlink()
    (out / "receipts.jsonl").symlink_to(outside)
    proc = margin("run", "--guard", "keyword", *QUICK, "--resume", str(out))
    assert proc.returncode == 2, proc.stderr
    (line,) = few_lines(proc, 1)
    assert f"{out / 'receipts.jsonl'}: is a symbolic link" in line
    assert outside.read_bytes() == before


def test_a_study_or_ablation_on_a_folder_being_written_is_refused(tmp_path):
    from tests.support.study import study_config, write_config

    config = write_config(tmp_path, study_config("http://127.0.0.1:9/v1"))
    commands = {
        "study": ["study", str(config), "--engine", "local", "--no-cache"],
        "ablation": ["ablate", "--guard", "keyword", "--suite", "quick", "--limit", "4", "--engine", "local"],
    }
    for what, command in commands.items():
        out = tmp_path / what
        with hold(out, what=f"{what} folder"):
            (out / "notes.txt").write_text("the first one's\n")
            for resume in ([], ["--resume"]):
                proc = margin(*command, "--out", str(out), *resume)
                assert proc.returncode == 2, proc.stderr
                (line,) = few_lines(proc, 1)
                assert f"another margin process writes this {what} folder" in line, line
                assert f"pid {os.getpid()} on {socket.gethostname()}" in line
            assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME, "notes.txt"]
