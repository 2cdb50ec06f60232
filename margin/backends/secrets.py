"""API keys: read only from the environment variable a spec names, and redacted everywhere.

A key read here is registered; `redact` replaces it in any text margin writes (raw outputs,
errors), and a log-record factory redacts every log record of the process, whichever
library emits it, so a server that echoes the key cannot leak it into logs either.
"""

from __future__ import annotations

import logging
import os
import re
import threading

from margin.errors import InputError

REDACTED = "[redacted]"
_secrets: set[str] = set()
_lock = threading.Lock()
_installed = False


def check_env_name(name: str | None) -> str | None:
    """For a spec's validator: a field that names the key's variable must not hold the key itself."""
    if name is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError("must be the NAME of an environment variable, not a key")
    return name


def read_api_key(env_name: str | None) -> str | None:
    """The key in `env_name` (registered for redaction); None when no variable is named."""
    if env_name is None:
        return None
    value = os.environ.get(env_name, "")
    if not value.strip():
        raise InputError(f"environment variable {env_name} is not set or empty; fix: export {env_name}=YOUR_KEY, "
                         f"or name the variable that holds it with --api-key-env", field="--api-key-env")
    register(value)
    return value


def register(secret: str) -> None:
    global _installed
    with _lock:
        _secrets.add(secret)
        if not _installed:
            _install_log_redaction()
            _installed = True


def redact(text: str) -> str:
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _install_log_redaction() -> None:
    previous = logging.getLogRecordFactory()

    def factory(*args, **kwargs):  # type: ignore[no-untyped-def]
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed record stays as it is; logging reports it
            return record
        clean = redact(message)
        if record.exc_info:
            clean_exc = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
            record.exc_text = clean_exc
        if clean != message or record.args:
            record.msg, record.args = clean, ()
        return record

    logging.setLogRecordFactory(factory)
