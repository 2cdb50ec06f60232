"""`margin run` on Ray as users run it: killed and resumed, on a two-node cluster, and
failing loudly when coverage is lost."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from margin.runfolder import read_jsonl
from tests.support.cli import margin
from tests.support.paths import REPO

pytestmark = [pytest.mark.ray, pytest.mark.slow]

LOGGED_GUARD = '''
import hashlib
import time

from margin.guards.keyword import KeywordGuard

LOG = {log!r}


class LoggedKeyword:
    """The keyword guard, a little slower, appending the SHA-256 of every text it answered."""

    max_batch_size = 64

    def __init__(self):
        self.inner = KeywordGuard()

    def classify(self, texts):
        time.sleep(0.01)
        verdicts = self.inner.classify(texts)
        with open(LOG, "a", encoding="utf-8") as handle:
            handle.write("".join(hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() + "\\n"
                                 for t in texts))
        return verdicts
'''


def logged_guard(folder: Path, name: str) -> tuple[str, Path]:
    log = folder / f"{name}.log"
    path = folder / f"{name}.py"
    path.write_text(LOGGED_GUARD.format(log=str(log)))
    return f"python:{path}:LoggedKeyword", log


def lines(path: Path) -> list[str]:
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    return text[: text.rfind("\n") + 1].splitlines()  # complete lines only


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "margin", "run", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def wait_for_no_guard_actors(timeout_s: float = 60.0) -> None:
    """A killed driver's actors die with its job; wait so their last writes are behind us."""
    import ray

    deadline = time.monotonic() + timeout_s
    def alive() -> bool:
        named = ray.util.list_named_actors(all_namespaces=True)
        return any(a["name"].startswith("margin-guard-") for a in named)

    while alive():
        assert time.monotonic() < deadline, "guard actors outlived their killed driver"
        time.sleep(0.2)
    time.sleep(0.3)


def test_sigkilled_runs_resume_to_the_uninterrupted_results_without_repeating_a_call(tmp_path, ray_address):
    options = ["--suite", "standard", "--batch-size", "8", "--num-cpus", "0", "--no-cache"]
    ref_guard, ref_log = logged_guard(tmp_path, "reference")
    done = subprocess.run(command("--guard", ref_guard, *options, "--out", str(tmp_path / "ref")),
                          capture_output=True, text=True, env=env(), timeout=300)
    assert done.returncode == 0, done.stderr
    total = len(lines(tmp_path / "ref" / "receipts.jsonl"))

    guard, log = logged_guard(tmp_path, "killed")
    out = tmp_path / "run"
    receipts = out / "receipts.jsonl"
    rng = random.Random(20240601)
    bounds: list[tuple[int, int]] = []  # (receipt lines, log lines) when each segment began
    for segment in range(4):
        bounds.append((len(lines(receipts)), len(lines(log))))
        where = ["--out", str(out)] if segment == 0 else ["--resume", str(out)]
        proc = subprocess.Popen(command("--guard", guard, *options, *where), env=env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if segment == 3:  # the last one runs to the end
            _, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, stderr
            break
        start = bounds[-1][0]
        kill_at = start + rng.randint(20, max(21, (total - start) // 3))
        while len(lines(receipts)) < kill_at:
            assert proc.poll() is None, f"the run ended before the kill point: {proc.stderr.read()}"
            time.sleep(0.005)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        wait_for_no_guard_actors()
    bounds.append((len(lines(receipts)), len(lines(log))))

    assert (out / "results.jsonl").read_bytes() == (tmp_path / "ref" / "results.jsonl").read_bytes()

    records = [json.loads(line) for line in lines(receipts)]
    logged = lines(log)
    completed = [r["text_sha256"] for r in records if r["kind"] == "call" and r["verdict"] and not r["cached"]]
    assert len(completed) == len(set(completed)), "a completed guard call was recorded twice"
    # A text may reach the guard twice only if its output died with a killed run, unrecorded.
    lost: Counter[str] = Counter()
    for (r0, l0), (r1, l1) in zip(bounds, bounds[1:], strict=False):
        recorded = {r["text_sha256"] for r in records[r0:r1] if r["kind"] == "call" and r["verdict"]}
        lost.update(set(logged[l0:l1]) - recorded)
    counts = Counter(logged)
    assert all(counts[t] == (t in set(completed)) + lost[t] for t in counts)
    assert sum(lost.values()) <= 3 * 2 * 8  # at most the calls in flight (2 per actor) at each kill
    assert set(counts) == set(lines(ref_log))  # the same texts as the uninterrupted run, in all
    assert sum(1 for r in records if r["kind"] == "result") == 48


def test_a_run_past_max_missing_fails_and_shows_its_lost_coverage(tmp_path, ray_cluster):
    """Also the default path: no --ray-address, so `margin run` starts (and stops) its own Ray."""
    guard = tmp_path / "picky.py"
    guard.write_text(
        "class Picky:\n"
        "    def classify(self, texts):\n"
        "        if any('hack' in t for t in texts):\n"
        "            raise TimeoutError('upstream timed out')\n"
        "        return ['safe' for _ in texts]\n"
    )
    out = tmp_path / "run"
    env_local = {k: v for k, v in env().items() if k != "RAY_ADDRESS"}
    args = ["--guard", f"python:{guard}:Picky", "--suite", "quick", "--limit", "12", "--batch-size", "1",
            "--max-attempts", "2", "--num-cpus", "0"]
    proc = subprocess.run(command(*args, "--out", str(out)), capture_output=True, text=True, env=env_local,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert "above --max-missing 1%" in proc.stderr and "prompts missing" in proc.stdout
    results = [json.loads(line) for line in lines(out / "results.jsonl")]
    missing = [r["prompt_id"] for r in results if r["status"] == "missing"]
    assert missing and all(r["flip_cost"] is None for r in results if r["status"] == "missing")
    coverage = json.loads((out / "snapshot.json").read_text())["data"][0]["coverage"]
    assert sum(coverage["missing"].values()) == len(missing)
    errors = [r["error"] for r in read_jsonl(out / "receipts.jsonl") if r.get("error")]
    assert any("upstream timed out" in e for e in errors)
    # Resuming retries the lost texts (a fresh set of attempts); they fail again, within 50%.
    again = subprocess.run(command(*args, "--resume", str(out), "--max-missing", "50%"), capture_output=True,
                           text=True, env={**env_local, "RAY_ADDRESS": ray_cluster}, timeout=300)
    assert again.returncode == 0, again.stderr
    attempts = [r["attempt"] for r in read_jsonl(out / "receipts.jsonl") if r.get("error") and not r["cached"]]
    assert max(attempts) == 4


def test_resume_and_merge_refuse_what_does_not_match(tmp_path):
    """The runs merged are made in this process (margin.run writes what `margin run` does);
    the refused resume and the merges are margin processes."""
    import margin as api

    base = ["--guard", "keyword", "--suite", "quick", "--limit", "4", "--engine", "local"]
    options = {"suite": "quick", "limit": 4, "engine": "local"}
    api.run("keyword", out=tmp_path / "a", **options)
    proc = margin("run", *base, "--budget", "50", "--resume", str(tmp_path / "a"))
    assert proc.returncode == 2 and "--budget" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    api.run("keyword", budget=50, out=tmp_path / "b", **options)
    proc = margin("merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m"))
    assert proc.returncode == 2 and "--budget" in proc.stderr and not (tmp_path / "m").exists()
    for i in (1, 2):
        api.run("keyword", shard=(i, 2), out=tmp_path / f"s{i}", **options)
    proc = margin("merge", str(tmp_path / "s1"), str(tmp_path / "s2"), "--out", str(tmp_path / "m"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "m" / "results.jsonl").read_bytes() == (tmp_path / "a" / "results.jsonl").read_bytes()
    proc = margin("merge", str(tmp_path / "s1"), "--out", str(tmp_path / "half"))
    assert proc.returncode == 1 and "above --max-missing" in proc.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_same_job_runs_on_a_two_node_cluster(tmp_path):
    ray_cli = str(Path(sys.executable).with_name("ray"))
    node_env = {k: v for k, v in env().items() if k != "RAY_ADDRESS"}
    node_env["RAY_AUTH_MODE"] = "disabled"
    port = free_port()
    address = f"127.0.0.1:{port}"
    temp = tempfile.mkdtemp(prefix="mray", dir="/tmp")  # Ray's socket paths must stay short
    nodes: list[subprocess.Popen[bytes]] = []
    try:
        nodes.append(subprocess.Popen(
            [ray_cli, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=1",
             "--include-dashboard=false", f"--temp-dir={temp}", "--disable-usage-stats", "--block"],
            env=node_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_nodes(address, 1, node_env)
        nodes.append(subprocess.Popen(
            [ray_cli, "start", f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
             "--disable-usage-stats", "--block"],
            env=node_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for_nodes(address, 2, node_env)
        # Two actors needing one CPU each, on two one-CPU nodes: one actor per node.
        args = ["run", "--guard", "keyword", "--suite", "quick", "--limit", "16"]
        on_cluster = subprocess.run([sys.executable, "-m", "margin", *args, "--ray-address", address,
                                     "--replicas", "2", "--num-cpus", "1", "--out", str(tmp_path / "cluster")],
                                    capture_output=True, text=True, env=node_env, timeout=300)
        assert on_cluster.returncode == 0, on_cluster.stderr
    finally:
        for node in reversed(nodes):
            node.send_signal(signal.SIGTERM)  # a --block node stops its own processes
        for node in reversed(nodes):
            try:
                node.wait(timeout=60)
            except subprocess.TimeoutExpired:
                node.kill()
        shutil.rmtree(temp, ignore_errors=True)
    local = margin(*args, "--engine", "local", "--out", str(tmp_path / "local"))
    assert local.returncode == 0
    assert (tmp_path / "cluster" / "results.jsonl").read_bytes() == (tmp_path / "local" / "results.jsonl").read_bytes()


def wait_for_nodes(address: str, count: int, node_env: dict[str, str], timeout_s: float = 120.0) -> None:
    code = (f"import ray; ray.init(address={address!r}, logging_level='ERROR'); "
            "print(sum(1 for n in ray.nodes() if n['Alive']))")
    deadline = time.monotonic() + timeout_s
    while True:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=node_env,
                              timeout=timeout_s)
        if proc.returncode == 0 and proc.stdout.strip().splitlines()[-1:] == [str(count)]:
            return
        assert time.monotonic() < deadline, f"the cluster never had {count} nodes: {proc.stderr[-500:]}"
        time.sleep(1.0)
