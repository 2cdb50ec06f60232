"""Ctrl-C at any moment (issue 35, item 2): a `margin run` on the Ray engine, with its own
private Ray, sent SIGINT while its commands load, while it imports Ray, while Ray starts, and
twice or three times in a row, exits 130 with one line saying nothing was written (or, once
it recorded something, the command that continues it) and never a traceback or a crash.

The moments are told apart by what can be seen of the process (the libraries it has loaded,
the processes it has started, the files it has written), never by how long it has run, so
the tests hold however loaded the machine is."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.test_cli_interrupt import OPTIONS, PROGRESS, hurry, recorded, slow_guard
from tests.support.cli import margin, margin_env

NOTHING = "interrupted before anything was recorded; nothing was written"

#: What a failed exit shows: a traceback, an exception Python could not raise, a crash.
BROKEN = ("Traceback", "Exception ignored", "core dumped", "Segmentation fault", "Fatal Python error")

#: 8 prompts of the quick suite, with the keyword guard on a Ray actor of a private Ray.
RUN = ["run", "--guard", "keyword", "--suite", "quick", "--limit", "8", "--no-cache", "--engine", "ray"]


def start(args: list[str]) -> subprocess.Popen[str]:
    env = margin_env({"RAY_ADDRESS": None})  # its own Ray, started (and stopped) by this run
    return subprocess.Popen([sys.executable, "-m", "margin", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env)


def loaded(proc: subprocess.Popen[str], library: str) -> bool:
    """Whether the process has loaded a shared library whose file name holds `library`."""
    try:
        return library in Path(f"/proc/{proc.pid}/maps").read_text()
    except OSError:
        return False


def started(proc: subprocess.Popen[str], program: str) -> bool:
    """Whether the process has a child process named `program`."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 1:].split()
        if name == program and rest[1] == str(proc.pid):
            return True
    return False


def when(proc: subprocess.Popen[str], ready: Callable[[], bool]) -> None:
    while not ready():
        assert proc.poll() is None, f"margin ended before it could be interrupted: {proc.stderr.read()}"
        time.sleep(0.01)


def ctrl_c(proc: subprocess.Popen[str], times: int = 1) -> list[str]:
    """SIGINT `times` in a row, as Ctrl-C pressed again and again sends it; margin's lines on
    stderr (less progress and the guard file's notice), once it has ended with 130."""
    for _ in range(times):
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            time.sleep(0.05)
    _, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert not any(word in stderr for word in BROKEN), stderr
    return [line for line in stderr.strip().splitlines()
            if not PROGRESS.match(line) and not line.startswith("runs code: guard python:")]


@pytest.mark.slow  # starts margin three times, to the moment each is interrupted
@pytest.mark.parametrize("library", ["fuzz_cpp", "_raylet"], ids=["loading-the-commands", "importing-ray"])
def test_ctrl_c_while_margin_loads_or_imports_ray_says_nothing_was_written(tmp_path, library):
    """`fuzz_cpp` is rapidfuzz's, which the commands import; `_raylet` is Ray's core."""
    out = tmp_path / "run"
    proc = start([*RUN, "--out", str(out)])
    when(proc, lambda: loaded(proc, library))
    assert ctrl_c(proc) == [NOTHING]
    assert not out.exists()


@pytest.mark.slow  # a private Ray started, then stopped
@pytest.mark.parametrize("times", [1, 3], ids=["once", "three-times"])
def test_ctrl_c_while_ray_starts_says_nothing_was_written_and_stops_ray(tmp_path, times):
    out = tmp_path / "run"
    proc = start([*RUN, "--out", str(out)])
    when(proc, lambda: started(proc, "gcs_server"))  # Ray's first process: Ray is starting
    assert ctrl_c(proc, times) == [NOTHING]
    assert not out.exists()


@pytest.mark.slow  # a private Ray, the slow guard's run to its first receipt, then its resume
def test_ctrl_c_twice_once_something_is_recorded_prints_the_resume_command_once(tmp_path):
    out = tmp_path / "run"
    args = ["run", "--guard", slow_guard(tmp_path), *OPTIONS, "--engine", "ray", "--num-cpus", "0",
            "--out", str(out)]
    proc = start(args)
    when(proc, lambda: recorded(out))
    said = ctrl_c(proc, times=2)
    hurry(tmp_path)
    assert said[0] == f"interrupted: {out}/ keeps what was recorded; continue with"
    assert len(said) == 2 and said[1].strip().endswith(f"--resume {out}")
    resumed = margin(*shlex.split(said[1])[1:], env={"RAY_ADDRESS": None})  # as printed
    assert resumed.returncode == 0, resumed.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 8
