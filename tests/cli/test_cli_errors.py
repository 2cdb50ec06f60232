"""One error path for the whole CLI (issue 22, cases 3, 4 and 11): every usage error, bad
input and setup failure is a few lines with exit 2 and no traceback, naming the cause and the
fix; an unexpected error is one line with exit 1 (its traceback only with --debug); a failure
before the first result leaves no folder behind, and a folder whose run recorded nothing is
accepted by a rerun with the same --out or by --resume."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from margin.runs.recording.folder import remove_unstarted, unstarted
from tests.support.cli import margin, margin_env

PROGRESS = re.compile(r"prompts [0-9,]+/[0-9,]+ ")
QUICK = ["--suite", "quick", "--limit", "4", "--engine", "local"]


def few_lines(proc, most: int = 3) -> list[str]:
    """stderr as lines, checked: at most `most`, no traceback (progress lines, printed every
    10 s while a slow model loads, left out)."""
    lines = [line for line in proc.stderr.strip().splitlines() if not PROGRESS.match(line)]
    assert "Traceback" not in proc.stderr and "╭" not in proc.stderr, proc.stderr
    assert 1 <= len(lines) <= most, proc.stderr
    return lines


# -- case 3: usage errors --------------------------------------------------------------------

@pytest.mark.parametrize(("args", "expected"), [
    (["run", "--gaurd", "keyword"], "no such option --gaurd; did you mean --guard?"),
    (["run", "--guard", "keyword", "--dataest", "x"], "did you mean --dataset?"),
    (["run"], "Missing option '--guard'"),
    (["rnu"], "No such command 'rnu'. Did you mean 'run'?"),
    ([], "missing command; one of ablate, check, diff, export, guards"),
    (["transforms"], "missing command; one of apply, list"),
    (["run", "--guard", "keyword", "--budget", "abc"], "Invalid value for '--budget'"),
])
def test_a_usage_error_is_usage_and_error_with_exit_2(args, expected):
    proc = margin(*args)
    assert proc.returncode == 2, proc.stderr
    usage, error, hint = few_lines(proc)
    assert usage.startswith("Usage: margin") and error.startswith("error: ") and expected in error
    assert hint.startswith("Try 'margin") and hint.endswith("--help' for help.")


def test_version_and_help():
    from importlib.metadata import version

    proc = margin("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"margin {version('margin')}"
    helped = margin("--help")
    assert helped.returncode == 0 and "--debug" in helped.stdout and "--version" in helped.stdout


# A fault inside margin itself (not the user's input): prepare() patched to raise, in a real process.
BROKEN_MARGIN = ("import sys, margin.runs.preparing.prepare as p\n"
                 "def broken(config): raise RuntimeError('boom inside margin')\n"
                 "p.prepare = broken\n"
                 "from margin.cli import main\n"
                 "sys.argv = ['margin', *sys.argv[1:]]\n"
                 "main()\n")


def broken_margin(*args: str, env: dict[str, str | None] | None = None):
    return subprocess.run([sys.executable, "-c", BROKEN_MARGIN, *args], capture_output=True, text=True,
                          env=margin_env(env), timeout=300)


def test_an_unexpected_error_is_one_line_unless_debug_asks(tmp_path):
    args = ["run", "--guard", "keyword", *QUICK, "--out", str(tmp_path / "run")]
    proc = broken_margin(*args)
    assert proc.returncode == 1
    error, hint = few_lines(proc, 2)
    assert error == "error: RuntimeError: boom inside margin" and "--debug" in hint
    for debug in (broken_margin(*args, "--debug"), broken_margin("--debug", *args),
                  broken_margin(*args, env={"MARGIN_DEBUG": "1"})):
        assert debug.returncode == 1
        assert "Traceback" in debug.stderr and "boom inside margin" in debug.stderr
    assert not (tmp_path / "run").exists()


def test_a_guard_whose_constructor_fails_is_a_setup_error(tmp_path):
    """The user's class raising in __init__ is their setup, not margin's fault: one line, exit 2."""
    (tmp_path / "broken.py").write_text(
        "class Broken:\n    def __init__(self):\n        raise RuntimeError('boom in the constructor')\n\n"
        "    def classify(self, texts):\n        return ['safe' for _ in texts]\n")
    proc = margin("run", "--guard", f"python:{tmp_path / 'broken.py'}:Broken", *QUICK, "--out", str(tmp_path / "run"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "boom in the constructor" in proc.stderr and len(proc.stderr.strip().splitlines()) <= 3
    assert not (tmp_path / "run").exists()


# -- case 4: setup failures --------------------------------------------------------------------

def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # nothing listens once it is closed


@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_guard_without_its_weights_says_how_to_get_them_and_writes_nothing(tmp_path, engine):
    """On Ray too: checked in the driver before Ray or an actor starts ($RAY_ADDRESS unset)."""
    out = tmp_path / "run"
    empty_cache = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_CACHE": None, "RAY_ADDRESS": None}
    offline = margin("run", "--guard", "llama-guard-4", "--engine", engine, "--out", str(out),
                     env={**empty_cache, "HF_HUB_OFFLINE": "1"})
    assert offline.returncode == 2
    (line,) = few_lines(offline, 1)
    assert "meta-llama/Llama-Guard-4-12B" in line and "not in the Hugging Face cache" in line
    assert "HF_HUB_OFFLINE" in line and "hf download meta-llama/Llama-Guard-4-12B" in line
    assert not out.exists()
    # Downloads allowed, but the hub cannot be reached: the same line at once, not minutes of retries.
    unreachable = margin("run", "--guard", "llama-guard-4", "--engine", engine, "--out", str(out),
                         env={**empty_cache, "HF_HUB_OFFLINE": None, "TRANSFORMERS_OFFLINE": None,
                              "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"})
    assert unreachable.returncode == 2
    (line,) = few_lines(unreachable, 1)
    assert "cannot be reached" in line and "hf download" in line
    assert not out.exists()


def broken_checkpoint(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text("{}")  # a folder that is not a whole checkpoint
    return folder


@pytest.mark.slow  # torch and transformers load, then fail on the broken checkpoint (about 6 s)
def test_a_guard_whose_model_fails_to_load_is_one_line_and_leaves_no_folder(tmp_path):
    model = broken_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "run"
    proc = margin("run", "--guard", "llama-guard-3-1b", "--model", str(model), *QUICK, "--out", str(out))
    assert proc.returncode == 2
    (line,) = few_lines(proc, 1)
    assert line.startswith(f"error: --guard: could not load {model}") and "whole checkpoint folder" in line
    assert not out.exists()


@pytest.mark.slow
def test_on_ray_an_actor_that_cannot_build_its_guard_is_one_line(tmp_path, ray_address):
    model = broken_checkpoint(tmp_path / "ckpt")
    out = tmp_path / "run"
    proc = margin("run", "--guard", "llama-guard-3-1b", "--model", str(model), "--suite", "quick", "--limit", "4",
                  "--num-cpus", "0", "--out", str(out))
    assert proc.returncode == 2
    (line,) = few_lines(proc, 1)
    assert f"could not load {model}" in line and "whole checkpoint folder" in line
    assert not out.exists()


def test_a_missing_package_names_the_extra(tmp_path):
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    proc = margin("run", "--guard", "llama-guard-4", "--backend", "vllm", *QUICK, "--out", str(tmp_path / "run"))
    assert proc.returncode == 2
    (line,) = few_lines(proc, 1)
    assert "needs vllm" in line and "pip install 'margin[vllm]'" in line


def test_a_missing_api_key_and_an_unknown_preset_name_their_fix(tmp_path):
    proc = margin("run", "--guard", "openai-moderation", "--api-key-env", "MARGIN_TEST_NO_SUCH_KEY", *QUICK,
                  "--out", str(tmp_path / "run"), env={"MARGIN_TEST_NO_SUCH_KEY": None})
    assert proc.returncode == 2
    (line,) = few_lines(proc, 1)
    assert "MARGIN_TEST_NO_SUCH_KEY is not set" in line and "export MARGIN_TEST_NO_SUCH_KEY=" in line
    proc = margin("run", "--guard", "lama-guard-4", *QUICK)
    assert proc.returncode == 2
    (line,) = few_lines(proc, 1)
    assert "unknown guard 'lama-guard-4'; did you mean llama-guard-4" in line and "margin guards list" in line
    assert not (tmp_path / "run").exists()


# -- case 11: folders of runs that recorded nothing ----------------------------------------------

def killed_before_run_json(folder: Path) -> Path:
    """What `kill -9` during the claim leaves: the folder and the temp file of run.json's atomic write."""
    folder.mkdir()
    (folder / ".run.json.k1ll3d").write_text('{"dataset": {"na')
    return folder


def test_a_run_killed_before_run_json_reruns_or_resumes_in_its_folder(tmp_path):
    rerun = killed_before_run_json(tmp_path / "rerun")
    proc = margin("run", "--guard", "keyword", *QUICK, "--out", str(rerun))
    assert proc.returncode == 0, proc.stderr
    resumed = killed_before_run_json(tmp_path / "resumed")
    proc = margin("run", "--guard", "keyword", *QUICK, "--resume", str(resumed))
    assert proc.returncode == 0, proc.stderr
    for folder in (rerun, resumed):
        assert sorted(p.name for p in folder.iterdir()) == [
            "curves.png", "curves.svg", "receipts.jsonl", "results.jsonl", "run.json", "snapshot.json"]
    assert (rerun / "results.jsonl").read_bytes() == (resumed / "results.jsonl").read_bytes()


def test_a_folder_with_recorded_work_is_still_refused_by_a_plain_rerun(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "run.json").write_text(json.dumps({"dataset": {}}) + "\n")  # a run that failed before its first receipt
    (out / "receipts.jsonl").write_text("")
    assert unstarted(out)
    assert margin("run", "--guard", "keyword", *QUICK, "--out", str(out)).returncode == 0
    proc = margin("run", "--guard", "keyword", *QUICK, "--out", str(out))
    assert proc.returncode == 2
    (line,) = few_lines(proc, 1)
    assert "not empty" in line and "--resume" in line
    missing = margin("run", "--guard", "keyword", *QUICK, "--resume", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no such run folder" in few_lines(missing, 1)[0]


def test_unstarted_is_only_what_a_start_writes(tmp_path):
    folder = tmp_path / "f"
    folder.mkdir()
    (folder / "run.json").write_text("{}\n")
    (folder / "receipts.jsonl").write_text('{"kind": "call"')  # a torn first line: nothing recorded
    (folder / "drivers" / "1-of-2").mkdir(parents=True)
    (folder / "drivers" / "1-of-2" / ".receipts.jsonl.tmp").write_text("")
    assert unstarted(folder)
    (folder / "notes.txt").write_text("mine")
    assert not unstarted(folder)
    remove_unstarted(folder)
    assert (folder / "notes.txt").exists()  # never removes what a run did not write
    (folder / "notes.txt").unlink()
    (folder / "receipts.jsonl").write_text('{"kind": "call"}\n')
    assert not unstarted(folder)


def test_a_ray_address_nothing_answers_at_fails_at_once(tmp_path):
    out = tmp_path / "run"
    proc = margin("run", "--guard", "keyword", "--limit", "4", "--ray-address", f"127.0.0.1:{closed_port()}",
                  "--out", str(out))
    assert proc.returncode == 2
    (line,) = few_lines(proc, 1)
    assert "--ray-address: no Ray cluster answers at 127.0.0.1:" in line and "ray start --head" in line
    assert not out.exists()
