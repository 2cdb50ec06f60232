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
