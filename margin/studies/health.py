"""Stop a study as soon as one of its models is known to answer nothing.

A model (or judge) endpoint that is down, or a server that never started, leaves every one
of its requests missing after every retry; a study that goes on anyway takes its whole
runtime to produce pairs with no evidence. `Health` watches every answer: once a pool has
answered none of its first `first` requests (all of them, for a pool asked fewer), it raises
`ModelUnavailable` naming the pool and the first error its receipts recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Requests a model must fail, with none answered, before the study stops.
FIRST_REQUESTS = 8


class ModelUnavailable(RuntimeError):
    """A model, judge or guard of a study gave no output at all: the study cannot measure it."""


@dataclass
class Health:
    first: int = FIRST_REQUESTS
    asked: dict[str, int] = field(default_factory=dict)
    answered: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)
    first_error: dict[str, str] = field(default_factory=dict)
    sealed: set[str] = field(default_factory=set)  # pools that will be asked nothing new
    names: dict[str, str] = field(default_factory=dict)  # pool -> how a message names it

    def ask(self, pool: str) -> None:
        self.asked[pool] = self.asked.get(pool, 0) + 1

    def seal(self, pool: str) -> None:
        self.sealed.add(pool)

    def recorded(self, pool: str, error: str | None) -> None:
        """A receipt written: the error of an attempt without output (None for an answer);
        keep the pool's first."""
        if error:
            self.first_error.setdefault(pool, error)

    def told(self, pool: str, output: Any) -> None:
        """An answer (None: missing after every attempt); raises once the pool is known dead."""
        if output is not None:
            self.answered[pool] = self.answered.get(pool, 0) + 1
            return
        self.missing[pool] = lost = self.missing.get(pool, 0) + 1
        enough = min(self.first, self.asked.get(pool, 0)) if pool in self.sealed else self.first
        if not self.answered.get(pool) and lost >= enough:
            raise ModelUnavailable(
                f"{self.names.get(pool, f'model {pool}')} answered none of its first {lost} requests "
                "(every attempt failed); "
                f"its first error: {self.first_error.get(pool, 'no output')}")
