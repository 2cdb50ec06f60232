"""Ctrl-C and progress (issue 22, case 8), as a user meets them: a real `margin run`
subprocess sent SIGINT prints the exact command that continues it and exits 130, on both
engines, without a traceback (so do `margin study` and `margin ablate`, with
`--out DIR --resume`); progress is a live bar with the time left on a
terminal and plain lines when stderr is a file or a pipe."""

from __future__ import annotations

import os
import pty
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.cli import margin, margin_env
from tests.support.study import study_config, toy_server, write_config

PROGRESS = re.compile(r"prompts [0-9,]+/[0-9,]+ \(\d+%\)")

SLOW_GUARD = '''
import time
from pathlib import Path

from margin.guards.keyword import KeywordGuard

BUILT = Path({built!r})


class Slow:
    """The keyword guard, 0.1 s a batch of two until the test hurries it (the run to interrupt
    is slow, its resume need not be); its second build (the one that searches, after the one
    that described it) waits {build_wait} s, its first call {first_call_wait} s."""

    max_batch_size = 2

    def __init__(self):
        BUILT.mkdir(exist_ok=True)
        (BUILT / str(len(list(BUILT.iterdir())))).touch()
        if len(list(BUILT.iterdir())) > 1:
            time.sleep({build_wait})
        self.inner = KeywordGuard()

    def classify(self, texts):
        first = BUILT.parent / "called"
        if not first.exists():
            first.touch()
            time.sleep({first_call_wait})
        if not (BUILT.parent / "hurry").exists():
            time.sleep(0.1)
        return self.inner.classify(texts)
'''

#: 8 prompts, every candidate asked (about 220 texts): some seconds of guard calls to interrupt.
OPTIONS = ["--suite", "quick", "--limit", "8", "--search", "exhaustive", "--batch-size", "2", "--no-cache"]


def slow_guard(folder: Path, build_wait: float = 0, first_call_wait: float = 0) -> str:
    path = folder / "slow.py"
    path.write_text(SLOW_GUARD.format(built=str(folder / "built"), build_wait=build_wait,
                                      first_call_wait=first_call_wait))
    return f"python:{path}:Slow"


def hurry(folder: Path) -> None:
    """The slow guard in `folder` stops waiting 0.1 s a batch (its file, so its identity, unchanged)."""
    (folder / "hurry").touch()


def start(args: list[str], env: dict[str, str | None] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "margin", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=margin_env(env))


def wait_for(proc: subprocess.Popen[str], ready) -> None:  # type: ignore[no-untyped-def]
    while not ready():
        assert proc.poll() is None, f"margin ended before it could be interrupted: {proc.stderr.read()}"
        time.sleep(0.02)


def interrupt(proc: subprocess.Popen[str]) -> list[str]:
    """SIGINT, as Ctrl-C sends it; the lines on stderr that are not progress (nor ablate's
    `[i/n] defence`), after the one line naming the slow guard's file that was imported."""
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "Event loop is closed" not in stderr, stderr
    lines = [line for line in stderr.strip().splitlines() if not PROGRESS.match(line) and not line.startswith("[")]
    notices = [line for line in lines if line.startswith("runs code: guard python:")]
    assert len(notices) == 1 and notices[0].endswith("slow.py"), stderr
    return [line for line in lines if line not in notices]


def recorded(out: Path) -> bool:
    receipts = out / "receipts.jsonl"
    return receipts.exists() and b"\n" in receipts.read_bytes()


def interrupt_and_resume(tmp_path: Path, engine_options: list[str], env: dict[str, str | None] | None = None) -> None:
    out = tmp_path / "run"
    args = ["run", "--guard", slow_guard(tmp_path), *OPTIONS, *engine_options, "--out", str(out)]
    proc = start(args, env)
    wait_for(proc, lambda: recorded(out))
    said, command = interrupt(proc)
    hurry(tmp_path)
    assert said == f"interrupted: {out}/ keeps what was recorded; continue with"
    expected = shlex.join(["margin", *args[:-2], "--resume", str(out)])
    assert command.strip() == expected
    words = shlex.split(command)
    assert words[0] == "margin"
    resumed = margin(*words[1:], env=env)  # the printed command, as printed
    assert resumed.returncode == 0, resumed.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 8


@pytest.mark.slow  # the slow guard's run up to the interrupt, then its resume, in two subprocesses
def test_ctrl_c_prints_the_resume_command_and_it_finishes_the_run(tmp_path):
    interrupt_and_resume(tmp_path, ["--engine", "local"])


@pytest.mark.slow
def test_ctrl_c_on_ray_is_as_clean(tmp_path, ray_address):
    interrupt_and_resume(tmp_path, ["--num-cpus", "0"])


def test_ctrl_c_before_anything_is_recorded_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    proc = start(["run", "--guard", slow_guard(tmp_path, build_wait=120), *OPTIONS, "--engine", "local",
                  "--out", str(out)])
    wait_for(proc, lambda: len(list((tmp_path / "built").glob("*"))) >= 2)  # building the guard that searches
    assert interrupt(proc) == ["interrupted before anything was recorded; nothing was written"]
    assert not out.exists()


@pytest.mark.slow  # a study in two subprocesses (about 4 s of CPU) and the slow guard's waits
def test_ctrl_c_in_a_study_prints_its_resume_command_and_it_finishes_the_study(tmp_path):
    out = tmp_path / "study"
    with toy_server() as url:
        config = study_config(url, guard={"guard": slow_guard(tmp_path)}, runtime={"batch_size": 2})
        args = ["study", str(write_config(tmp_path, config)), "--engine", "local", "--no-cache", "--out", str(out)]
        proc = start(args)
        wait_for(proc, lambda: recorded(out / "guards" / "00-python-slow.py-Slow"))
        said, command = interrupt(proc)
        hurry(tmp_path)
        assert said == f"interrupted: {out}/ keeps what was recorded; continue with"
        assert command.strip() == shlex.join(["margin", *args, "--resume"])
        resumed = margin(*shlex.split(command)[1:])  # the printed command, as printed
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "pairings.json").is_file()


ABLATE = ["ablate", "--suite", "quick", "--limit", "4", "--search", "cheapest", "--defences", "nfkc",
          "--batch-size", "2", "--no-cache", "--engine", "local"]


@pytest.mark.slow  # an ablation of the slow guard, stopped and resumed (about 4 s of CPU and its waits)
def test_ctrl_c_in_an_ablation_prints_its_resume_command_and_it_finishes_in_the_same_folder(tmp_path):
    out = tmp_path / "ablation"
    args = [*ABLATE, "--guard", slow_guard(tmp_path), "--out", str(out)]
    proc = start(args)
    wait_for(proc, lambda: recorded(out / "none"))
    said, command = interrupt(proc)
    hurry(tmp_path)
    assert said == f"interrupted: {out}/ keeps what was recorded; continue with"
    assert command.strip() == shlex.join(["margin", *args, "--resume"])
    resumed = margin(*shlex.split(command)[1:], cwd=tmp_path)  # the printed command, as printed
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "ablation.json").is_file() and not (tmp_path / "runs").exists()


def test_ctrl_c_in_an_ablation_before_anything_is_recorded_leaves_nothing(tmp_path):
    out = tmp_path / "ablation"
    proc = start([*ABLATE, "--guard", slow_guard(tmp_path, build_wait=120), "--out", str(out)])
    wait_for(proc, lambda: len(list((tmp_path / "built").glob("*"))) >= 2)  # building the guard that searches
    assert interrupt(proc) == ["interrupted before anything was recorded; nothing was written"]
    assert not out.exists()


def test_an_interrupted_ablation_that_recorded_nothing_leaves_no_folder_to_refuse_a_rerun(tmp_path):
    """A defence's run killed between its run.json and its first receipt recorded nothing: its
    folder goes, so the same --out is taken again; one receipt line keeps everything."""
    from margin.cli.ablate import kept_if_recorded

    out = tmp_path / "ablation"
    (out / "none").mkdir(parents=True)
    (out / "none" / "run.json").write_text("{}\n")
    (out / "none" / "receipts.jsonl").write_text("")
    assert not kept_if_recorded(out, made=True) and not out.exists()
    (out / "none").mkdir(parents=True)
    (out / "none" / "receipts.jsonl").write_text('{"kind": "call"}\n')
    assert kept_if_recorded(out, made=True) and (out / "none" / "receipts.jsonl").is_file()
    given = tmp_path / "given"  # a folder the user made keeps existing, emptied
    (given / "none").mkdir(parents=True)
    assert not kept_if_recorded(given, made=False) and given.is_dir() and not any(given.iterdir())


@pytest.mark.slow  # four runs in subprocesses, two of them killed at the first call
def test_a_run_killed_before_its_first_receipt_reruns_and_resumes_in_its_folder(tmp_path):
    """kill -9 once run.json is written and the guard's first call is under way (case 11)."""
    guard = slow_guard(tmp_path, first_call_wait=120)
    hurry(tmp_path)  # the kill needs only the first call's wait; the reruns need no other
    args = ["run", "--guard", guard, *OPTIONS, "--engine", "local"]
    for again in ("--out", "--resume"):
        out = tmp_path / again.strip("-")
        (tmp_path / "called").unlink(missing_ok=True)
        proc = start([*args, "--out", str(out)])
        wait_for(proc, lambda out=out: (tmp_path / "called").exists() and (out / "run.json").exists())
        proc.kill()
        proc.communicate(timeout=60)
        assert not recorded(out)
        rerun = margin(*args, again, str(out))
        assert rerun.returncode == 0, rerun.stderr
        assert len((out / "results.jsonl").read_text().splitlines()) == 8


def test_progress_is_plain_lines_when_stderr_is_not_a_terminal(tmp_path):
    proc = margin("run", "--guard", "keyword", "--suite", "quick", "--engine", "local", "--out", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if PROGRESS.match(line)]
    # 48 prompts: a line at each tenth (5, 10, 15, 20, 24, 29, 34, 39, 44, 48), besides any every 10 s
    steps = [int(line.split()[1].split("/")[0]) for line in lines]
    assert {5, 10, 15, 20, 24, 29, 34, 39, 44, 48} <= set(steps) and steps == sorted(steps)
    assert lines[-1].startswith("prompts 48/48 (100%)") and "flips" in lines[-1] and "elapsed" in lines[-1]
    assert all(" eta " in line for line, step in zip(lines, steps, strict=True) if 0 < step < 48)
    assert "\x1b[" not in proc.stderr  # no terminal control codes in a log


@pytest.mark.slow  # the slow guard's run until its bar shows
def test_progress_on_a_terminal_is_a_bar_with_the_time_left(tmp_path):
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "margin", "run", "--guard", slow_guard(tmp_path), *OPTIONS,
                             "--engine", "local", "--out", str(tmp_path / "r")],
                            stdout=subprocess.DEVNULL, stderr=terminal, env=margin_env({"TERM": "xterm"}))
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal's other end closed: margin ended
            break
        if not chunk:
            break
        shown += chunk
        if "━".encode() in shown:  # the bar is up mid-run: the rest of the run need not be slow
            hurry(tmp_path)
    os.close(controller)
    assert proc.wait(timeout=300) == 0
    text = shown.decode("utf-8", "replace")
    assert "━" in text and "/8" in text and "eta" in text  # rich's bar, prompts done of 8, time left
    assert not PROGRESS.search(text)  # not the plain lines
