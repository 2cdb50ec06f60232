"""Joining a Ray cluster, or starting a small private one, for the actor pools.

Ray is imported lazily: `import margin` never pays for it, and runs whose models are all
remote endpoints never start it.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Any

from margin.errors import InputError
from margin.util.interrupts import deferred

#: Seconds a cluster's address has to accept a connection.
REACH_TIMEOUT_S = 5.0


def connect(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Join `address` (`auto`, `HOST:PORT`, `ray://HOST:PORT`; default $RAY_ADDRESS, which a
    Ray job's driver has) or start a small local Ray.

    Returns whether this call connected or started Ray, i.e. whether the caller should shut
    it down. A Ray already initialised in this process (a library user's) is used as is.
    A Ctrl-C while Ray is imported or starts waits until it has (`deferred`): cut half way,
    it leaves a half-imported `ray` (whose clean-up then fails) or half-started processes.
    """
    with deferred():
        return _connect(address, num_cpus)


def import_ray() -> Any:
    """`import ray`, whole even if Ctrl-C comes meanwhile (the first import takes seconds)."""
    with deferred():
        import ray
    return ray


def _connect(address: str | None, num_cpus: int | None) -> bool:
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
        check_reachable(address)
        if address.startswith("ray://"):
            try:
                ray.init(address=address, logging_level=logging.ERROR)
            except ValueError as exc:
                if "ray[client]" not in str(exc):
                    raise
                raise InputError(
                    "ray:// addresses need Ray Client: pip install 'margin[cluster]' (or 'ray[client]'), "
                    "or run margin on a cluster node with --ray-address auto", field="--ray-address",
                ) from None
        else:
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
            except ConnectionError as exc:  # `auto` with no cluster here, a node that is not Ray's
                raise InputError(f"{str(exc).splitlines()[0]}; fix: start one (`ray start --head`) or run without "
                                 f"--ray-address and $RAY_ADDRESS to start a local Ray", field="--ray-address") from None
        return True
    # A local, private cluster: no auth token written into the home folder, no dashboard.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
             log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
    return True


def check_reachable(address: str) -> None:
    """A cluster's HOST:PORT must accept a connection: Ray itself would wait minutes on one
    that does not. (`auto` is left to Ray, which fails at once when no cluster runs here.)"""
    if address == "auto":
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise InputError(f"expected auto, HOST:PORT or ray://HOST:PORT, got {address!r}", field="--ray-address")
    try:
        socket.create_connection((host, int(port)), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        raise InputError(f"no Ray cluster answers at {host}:{port} ({exc.strerror or exc}); fix: check the "
                         f"address (ray status on the head node), start one with `ray start --head`, or run "
                         f"without --ray-address and $RAY_ADDRESS to start a local Ray", field="--ray-address") from None


def disconnect(started: bool) -> None:
    """Stop the Ray `connect` started; a Ctrl-C meanwhile waits until it has stopped."""
    if started:
        with deferred():
            import ray

            ray.shutdown()
