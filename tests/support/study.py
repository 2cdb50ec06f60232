"""Helpers for paired-study tests: the example's toy server, and configs written in tmp."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

from tests.support.paths import REPO


def toy_module() -> ModuleType:
    """studies/local_server.py, imported from its file (studies/ is not a package)."""
    name = "margin_study_local_server"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / "studies" / "local_server.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@contextlib.contextmanager
def toy_server(delay_s: float = 0.0, log: list[tuple[str, str]] | None = None) -> Iterator[str]:
    """The example's toy assistants and judges on 127.0.0.1, a free port; yields the /v1 URL.
    `log` gets (model, messages hash) for every request answered."""
    server = toy_module().make_server("127.0.0.1", 0, delay_s, log)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def model_entry(url: str, name: str = "toy-medium", **extra: Any) -> dict[str, Any]:
    sizes = {"toy-small": (0.5, 3), "toy-medium": (4, 8), "toy-large": (30, 15)}
    size, index = sizes.get(name, (1, 1))
    return {"id": name, "name": name, "creator": "margin", "parameters_b": size, "capability_index": index,
            "backend": "openai", "model": name, "base_url": url,
            "backend_options": {"max_attempts": 1, "timeout_s": 10, "hedge_after_s": "off"}, **extra}


def study_config(url: str, *, guard: Any = "keyword", models: list[str] | None = None,
                 transformations: list[tuple[str, str]] | None = None, judge_url: str | None = None,
                 judge_model: str = "toy-judge", second_judge: str | None = None,
                 prompts: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": "test",
        "dataset": "sample",
        "prompts": prompts if prompts is not None else {"ids": ["s1", "s3", "s7", "s13", "s20", "s24",
                                                                "u1", "u5", "u10", "u13", "u17", "u19"]},
        "guards": [guard],
        "models": [model_entry(url, m) for m in (models or ["toy-medium"])],
        "judge": {"template": "behaviour", "model": {"backend": "openai", "model": judge_model,
                                                     "base_url": judge_url or url}},
        "transformations": [{"transform": t, "strength": s}
                            for t, s in (transformations or [("zero-width-space", "100%")])],
        "runtime": {"max_attempts": 2, "retry_wait_s": 0.01},
        **extra,
    }
    if second_judge:
        config["second_judge"] = {"id": "second", "template": "behaviour",
                                  "model": {"backend": "openai", "model": second_judge, "base_url": url}}
    return config


def write_config(folder: Path, config: dict[str, Any], name: str = "study.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def pair(pairings: dict[str, Any], guard_id: str, model_id: str) -> dict[str, Any]:
    return next(d for d in pairings["data"] if d["guard_id"] == guard_id and d["model_id"] == model_id)


def row(pairings: dict[str, Any], guard_id: str, model_id: str, name: str) -> dict[str, Any]:
    return next(t for t in pair(pairings, guard_id, model_id)["transformations"] if t["name"] == name)
