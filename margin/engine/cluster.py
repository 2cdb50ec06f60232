"""Joining a Ray cluster, or starting a small private one, for the actor pools.

Ray is imported lazily: `import margin` never pays for it, and runs whose models are all
remote endpoints never start it.
"""

from __future__ import annotations

import logging
import os

from margin.errors import InputError


def connect(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Join `address` (`auto`, `HOST:PORT`, `ray://HOST:PORT`; default $RAY_ADDRESS, which a
    Ray job's driver has) or start a small local Ray.

    Returns whether this call connected or started Ray, i.e. whether the caller should shut
    it down. A Ray already initialised in this process (a library user's) is used as is.
    """
    import ray

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address:
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
            ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
        return True
    # A local, private cluster: no auth token written into the home folder, no dashboard.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
             log_to_driver=False, logging_level=logging.ERROR, configure_logging=True)
    return True


def disconnect(started: bool) -> None:
    if started:
        import ray

        ray.shutdown()
