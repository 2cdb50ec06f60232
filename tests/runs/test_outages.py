"""An endpoint's worst minutes, through a proxy on 127.0.0.1 in front of a real guard server:
an outage (connections refused, then back), a storm of 429s with Retry-After, frequent
hangs, an outage longer than --max-outage (the run stops, and the printed command resumes
it; on one driver or several, and for an ablation) and an endpoint that was never there. Each run ends exactly as the clean run does and
loses nothing; nothing here depends on how long anything took."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import socket
from collections import Counter
from pathlib import Path

import pytest

from benchmarks.fault_proxy import FaultMix, FaultProxy, Outage, Storm
from benchmarks.http_guard import start_server
from tests.support.cli import margin

pytestmark = pytest.mark.slow
NO_MIX = FaultMix(http_5xx=0, hang=0, garbage=0, drop=0)
LIMIT = "16"


def run_guard(url: str, out: Path, *extra: str):
    return margin("run", "--guard", "llama-guard-4", "--backend", "openai", "--base-url", url, "--suite", "quick",
                  "--limit", LIMIT, "--no-cache", "--engine", "local", "--out", str(out), *extra)


def calls(out: Path) -> list[dict]:
    return [r for r in map(json.loads, (out / "receipts.jsonl").read_text().splitlines()) if r["kind"] == "call"]


@pytest.fixture(scope="module")
def guard(tmp_path_factory):
    """The guard server's URL and the clean run's results."""
    server, url = start_server(delay_s=0.0, label="keyword")
    out = tmp_path_factory.mktemp("clean") / "run"
    try:
        proc = run_guard(url, out)
        assert proc.returncode == 0, proc.stderr
        yield url, (out / "results.jsonl").read_bytes()
    finally:
        server.terminate()
        server.join(timeout=10)


def test_an_outage_mid_run_is_waited_out_and_loses_nothing(guard, tmp_path):
    url, clean = guard
    with FaultProxy(url.removesuffix("/v1"), mix=NO_MIX, outage=Outage(after=40, seconds=3)) as proxy:
        # Two attempts per text: one lost to the outage would leave none for its own failure.
        proc = run_guard(f"{proxy.url}/v1", tmp_path / "run", "--max-attempts", "2")
    assert proc.returncode == 0, proc.stderr
    assert proxy.downs == 1
    assert (tmp_path / "run" / "results.jsonl").read_bytes() == clean
    failed = [c for c in calls(tmp_path / "run") if c["error"]]
    assert failed and all("Connection" in c["error"] for c in failed)
    # Paused, not hammered: the requests in flight when it went down (64 at most), then
    # one probe at a time.
    assert len(failed) < 64 + 16


def test_a_storm_of_429s_uses_up_no_attempts(guard, tmp_path):
    url, clean = guard
    # A quarter of the attempts: a text 429'd n times in a row waits out a backoff doubling
    # from 0.5 s, so the longest such run (6 or 7 at 40%) made the run's length, not its checks.
    storm = Storm(share=0.25, retry_after_s=0.5, seconds=None)
    with FaultProxy(url.removesuffix("/v1"), mix=NO_MIX, storm=storm) as proxy:
        # One attempt per text: any 429 that used one up would lose its prompt.
        proc = run_guard(f"{proxy.url}/v1", tmp_path / "run", "--max-attempts", "1")
    assert proc.returncode == 0, proc.stderr
    assert proxy.faults["429"] > 10
    assert max(proxy.tries.values()) >= 4  # some text met 429 three times in a row and still got in
    assert (tmp_path / "run" / "results.jsonl").read_bytes() == clean
    assert sum("429" in (c["error"] or "") for c in calls(tmp_path / "run")) == proxy.faults["429"]


def test_frequent_hangs_are_each_hedged(guard, tmp_path):
    url, clean = guard
    mix = FaultMix(http_5xx=0, hang=0.2, garbage=0, drop=0)
    with FaultProxy(url.removesuffix("/v1"), mix=mix, hang_s=60) as proxy:
        proc = run_guard(f"{proxy.url}/v1", tmp_path / "run")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "run" / "results.jsonl").read_bytes() == clean
    sent = calls(tmp_path / "run")
    lost_to_hedges = sum((c["error"] or "").startswith("cancelled") for c in sent)
    # Every hung request was hedged and its copy answered first: more hedges than the old
    # cap (a tenth of the requests, plus 8) allowed.
    assert lost_to_hedges == proxy.faults["hang"] > 0.1 * len(sent) + 8


def test_an_outage_past_max_outage_stops_the_run_and_its_resume_repeats_nothing(guard, tmp_path):
    url, clean = guard
    out = tmp_path / "run"
    with FaultProxy(url.removesuffix("/v1"), mix=NO_MIX, outage=Outage(after=40, seconds=None)) as proxy:
        stopped = run_guard(f"{proxy.url}/v1", out, "--max-outage", "2s")
        assert stopped.returncode == 1, stopped.stderr
        message = stopped.stderr.strip().splitlines()[-1]
        assert f"{proxy.url}/v1 has answered nothing since" in message
        assert re.search(r"\((connection refused|dropped connections) x\d+", message), message  # why
        assert "max_outage 2 s" in message
        command = message.split("continue with: ", 1)[1]
        assert command.startswith("margin run ") and command.endswith(f"--resume {out}")
        before = [c for c in calls(out) if c["verdict"] is not None]
        assert before and not (out / "results.jsonl").exists()
        proxy.up()
        resumed = margin(*shlex.split(command)[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "results.jsonl").read_bytes() == clean
    answered = Counter(c["text_sha256"] for c in calls(out) if c["verdict"] is not None and not c["cached"])
    assert max(answered.values()) == 1  # no recorded answer was asked for again


class OneTextProxy(FaultProxy):
    """Scripts the first text it is asked about: 429s (waits) for its first `waits` sends
    (None: until the proxy has gone down and come back up), then `failures` HTTP 500s, then
    it passes. Every other request passes (or meets the outage)."""

    def __init__(self, upstream: str, *, waits: int | None, failures: int, outage: Outage | None = None) -> None:
        super().__init__(upstream, mix=NO_MIX, storm=Storm(share=0.0, retry_after_s=0.2), outage=outage)
        self.waits, self.failures = waits, failures
        self.target: bytes | None = None
        self.script: Counter[str] = Counter()

    def _fault(self, path: str, body: bytes) -> str | None:
        fault = super()._fault(path, body)
        digest = hashlib.sha256(path.encode() + b"\0" + body).digest()
        with self.lock:
            self.target = self.target or digest
            if fault is not None or digest != self.target:
                return fault
            sends = sum(self.script.values())
            if (sends < self.waits) if self.waits is not None else not self.downs:
                self.script["429"] += 1
                return "429"
            if self.script["500"] < self.failures:
                self.script["500"] += 1
                return "500"
            self.script["passed"] += 1
            return None


def attempts_of_the_scripted_text(out: Path) -> list[tuple[str, bool | None]]:
    """(what came back: 429, 500 or a verdict; whether it used up an attempt) of each send
    of the text that met the 429s (the first a run sent: not always the same text), in order."""
    lines = calls(out)
    (sha,) = {c["text_sha256"] for c in lines if "Error code: 429" in (c["error"] or "")}
    return [(next((code for code in ("429", "500") if f"Error code: {code}" in (c["error"] or "")), "answered"),
             c.get("charged")) for c in lines if c["text_sha256"] == sha and not c["cached"]]


def test_a_text_that_only_waited_before_a_stop_gets_all_its_attempts_after_resume(guard, tmp_path):
    """A text asked to wait (429) and then stopped with the run has used up no attempt: the
    resumed run gives it as many as an uninterrupted run would (here it needs all three)."""
    url, clean = guard
    upstream = url.removesuffix("/v1")
    with OneTextProxy(upstream, waits=1, failures=2) as proxy:
        whole = run_guard(f"{proxy.url}/v1", tmp_path / "whole", "--max-attempts", "3")
    assert whole.returncode == 0, whole.stderr
    assert proxy.script == {"429": 1, "500": 2, "passed": 1}
    assert (tmp_path / "whole" / "results.jsonl").read_bytes() == clean
    assert attempts_of_the_scripted_text(tmp_path / "whole") == [("429", False), ("500", True), ("500", True),
                                                                 ("answered", None)]
    out = tmp_path / "run"
    with OneTextProxy(upstream, waits=None, failures=2, outage=Outage(after=20, seconds=None)) as proxy:
        stopped = run_guard(f"{proxy.url}/v1", out, "--max-attempts", "3", "--max-outage", "2s")
        assert stopped.returncode == 1, stopped.stderr
        assert proxy.script["429"] >= 1 and not proxy.script["500"]
        command = stopped.stderr.strip().splitlines()[-1].split("continue with: ", 1)[1]
        proxy.up()
        resumed = margin(*shlex.split(command)[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert proxy.script["500"] == 2 and proxy.script["passed"] == 1
    assert (out / "results.jsonl").read_bytes() == clean
    assert attempts_of_the_scripted_text(out) == [("429", False)] * proxy.script["429"] + [("500", True)] * 2 + \
        [("answered", None)]


def test_an_endpoint_that_was_never_there_fails_at_once(tmp_path):
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = run_guard(f"http://127.0.0.1:{port}/v1", tmp_path / "run", "--max-outage", "10m")
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert f"guard at http://127.0.0.1:{port}/v1 refused the connection" in line
    assert not (tmp_path / "run").exists()  # nothing half-written


def test_max_outage_takes_seconds_or_a_duration(tmp_path):
    proc = run_guard("http://127.0.0.1:9/v1", tmp_path / "run", "--max-outage", "soon")
    assert proc.returncode == 2 and "--max-outage" in proc.stderr and "10m" in proc.stderr


def test_an_ablation_stops_past_its_max_outage_and_the_printed_command_resumes_it(guard, tmp_path):
    url, _ = guard
    out = tmp_path / "ablation"
    options = ["--defences", "none", "--suite", "quick", "--limit", LIMIT, "--no-cache", "--engine", "local"]
    whole = margin("ablate", "--guard", "llama-guard-4", "--backend", "openai", "--base-url", url, *options,
                   "--out", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    with FaultProxy(url.removesuffix("/v1"), mix=NO_MIX, outage=Outage(after=40, seconds=None)) as proxy:
        args = ["ablate", "--guard", "llama-guard-4", "--backend", "openai", "--base-url", f"{proxy.url}/v1",
                *options, "--max-outage", "2s", "--out", str(out)]
        stopped = margin(*args, cwd=tmp_path)
        assert stopped.returncode == 1, stopped.stderr  # not the default 10 minutes' wait
        message = stopped.stderr.strip().splitlines()[-1]
        assert f"{proxy.url}/v1 has answered nothing since" in message and "max_outage 2 s" in message
        assert f"kept in {out}/. When the endpoint is back, continue with: " in message
        command = message.split("continue with: ", 1)[1]
        assert command == shlex.join(["margin", *args, "--resume"])
        before = [c for c in calls(out / "none") if c["verdict"] is not None]
        assert before and not (out / "none" / "results.jsonl").exists()
        proxy.up()
        resumed = margin(*shlex.split(command)[1:], cwd=tmp_path)  # the printed command, as printed
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "none" / "results.jsonl").read_bytes() == (tmp_path / "whole" / "none" / "results.jsonl").read_bytes()
    assert (out / "ablation.json").is_file()
    answered = Counter(c["text_sha256"] for c in calls(out / "none") if c["verdict"] is not None and not c["cached"])
    assert max(answered.values()) == 1  # no recorded answer was asked for again


def test_an_outage_past_max_outage_on_several_drivers_says_what_one_driver_says(guard, tmp_path, ray_address):
    """The outage meets a driver inside a Ray actor: the same one line (URL, why, the resume
    command), exit 1, and the printed command finishes the run as the clean run ended."""
    url, clean = guard
    out = tmp_path / "run"
    with FaultProxy(url.removesuffix("/v1"), mix=NO_MIX, outage=Outage(after=40, seconds=None)) as proxy:
        stopped = margin("run", "--guard", "llama-guard-4", "--backend", "openai", "--base-url", f"{proxy.url}/v1",
                         "--suite", "quick", "--limit", LIMIT, "--no-cache", "--drivers", "2", "--driver-cpus", "0.25",
                         "--max-outage", "2s", "--out", str(out))
        assert stopped.returncode == 1, stopped.stderr
        assert "Traceback" not in stopped.stderr and "RayTaskError" not in stopped.stderr, stopped.stderr
        (message,) = [line for line in stopped.stderr.splitlines() if line.startswith("error:")]
        assert f"{proxy.url}/v1 has answered nothing since" in message and "max_outage 2 s" in message
        assert re.search(r"\((connection refused|dropped connections) x\d+", message), message
        command = message.split("continue with: ", 1)[1]
        assert command.startswith("margin run ") and command.endswith(f"--resume {out}")
        proxy.up()
        resumed = margin(*shlex.split(command)[1:])
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "results.jsonl").read_bytes() == clean


def test_an_endpoint_that_was_never_there_fails_at_once_on_several_drivers(tmp_path, ray_address):
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = run_guard(f"http://127.0.0.1:{port}/v1", tmp_path / "run", "--engine", "ray", "--drivers", "2",
                     "--driver-cpus", "0.25")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"guard at http://127.0.0.1:{port}/v1 refused the connection" in line
    assert not (tmp_path / "run").exists()
