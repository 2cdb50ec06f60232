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
    us to wait; `retry` is False when another attempt cannot help (a bad key, a bad request).
    The message is already redacted.
    """

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None,
                 retry: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s
        self.retry = retry

    @property
    def overload(self) -> bool:
        """The server says it has too much work: 429 Too Many Requests, 503 Unavailable."""
        return self.status in (429, 503)
