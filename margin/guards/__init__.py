"""Guards: the protocol, family adapters and backends."""

from margin.guards.base import Guard
from margin.guards.make import load_guard

__all__ = ["Guard", "load_guard"]
