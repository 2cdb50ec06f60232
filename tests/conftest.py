"""Shared fixtures. Tests run offline: no hub downloads, no Ray auth tokens."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import xstest_copy

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")



def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A test on the session's Ray cluster is a `ray` test, marked or not: the fast lane
    # (`make test-fast`, -m "not slow and not ray") must never start a cluster.
    for item in items:
        if {"ray_cluster", "ray_address"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ray)


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    # Never touch the user's cache from a test.
    monkeypatch.setenv("MARGIN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "margin-cache"))


@pytest.fixture
def xstest_csv() -> Path:
    path = xstest_copy()
    if path is None:
        pytest.skip("needs the pinned XSTest file: set MARGIN_XSTEST=PATH to a copy (margin verifies its SHA-256; "
                    "`margin run --dataset xstest` downloads it once into margin's cache)")
    return path


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[str]:
    """One small local Ray for the whole test session (local_mode is gone); yields its address."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR, configure_logging=True)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


@pytest.fixture
def ray_address(ray_cluster: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point `margin run` subprocesses at the session's Ray ($RAY_ADDRESS) rather than each
    starting its own (several seconds apiece on two cores)."""
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster)
    return ray_cluster
