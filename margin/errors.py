"""The one error type for bad user input: the CLI prints it on one line and exits with 2."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad input named by its file, line or field. Raised before anything is written."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path + (f":{self.line}" if self.line is not None else "")
        if self.field is not None:
            where = f"{where} [{self.field}]" if where else self.field
        return f"{where}: {self.message}" if where else self.message


class TransportError(Exception):
    """A call to a remote endpoint that produced no usable answer (HTTP error, timeout, a
    dropped connection, a body that is not JSON or not the API's shape).

    `status` is the HTTP status when there was one; `retry_after_s` what the server asked
    us to wait; `retry` is False when another attempt cannot help (a bad key, a bad request);
    `reached` is False when the request never reached the server (the connection was refused
    or could not be made), so it was not tried. The message is already redacted.
    """

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None,
                 retry: bool = True, reached: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
        self.retry = retry
        self.reached = reached

    @property
    def overload(self) -> bool:
        """The server says it has too much work: 429 Too Many Requests, 503 Unavailable."""
        return self.status in (429, 503)


class UnanswerableInput(Exception):
    """One input a local model can never answer as it is: longer than its window or its
    context (margin never truncates). A guard returns it in place of that text's verdict: the
    text has no output, and since another attempt cannot change that, the engine tries it
    once and records it missing with this reason, rather than retrying it to the limit."""


class CoverageError(Exception):
    """Too many prompts or outputs ended missing (past `--max-missing` or `runtime.max_missing`):
    a run's or a study's outputs are written, but the command failed (exit 1)."""


class EndpointDown(Exception):
    """An endpoint answered nothing for longer than its `max_outage`: the run stops cleanly
    (what it recorded stays; `--resume` continues it). Names the endpoint, since when
    (seconds since the epoch) and why (the causes of its failures, most frequent first)."""

    def __init__(self, endpoint: str, since: float, causes: list[str], max_outage_s: float) -> None:
        self.endpoint = endpoint
        self.since = since
        self.causes = causes
        self.max_outage_s = max_outage_s
        super().__init__(str(self))

    def __reduce__(self) -> tuple[type, tuple[str, float, list[str], float]]:
        # Pickled with its fields (a Ray driver actor raises it to the run), not its message.
        return (type(self), (self.endpoint, self.since, self.causes, self.max_outage_s))

    def __str__(self) -> str:
        import datetime as dt

        when = dt.datetime.fromtimestamp(self.since, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return (f"{self.endpoint} has answered nothing since {when} ({', '.join(self.causes)}), longer than "
                f"max_outage {self.max_outage_s:g} s")


class EndpointUnreachable(InputError):
    """An endpoint that has never answered in this run refused or could not take a
    connection: a wrong URL or a server not started. Exit 2 at once, not a wait."""
