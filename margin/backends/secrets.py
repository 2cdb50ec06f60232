"""Credentials: API keys read only from the environment variable a spec names, and the
credentials a URL may hold; none of them ever leaves the process.

A key read here is registered; `redact` replaces it in any text margin writes (raw outputs,
errors), and a log-record factory redacts every log record of the process, whichever
library emits it, so a server that echoes the key cannot leak it into logs either.

A URL (a guard's or model's `base_url`) is used as given for calls, but only `public_url`'s
form of it is recorded or shown: `user:password@` and the values of query keys that name a
credential become `[redacted]`. `register_url` registers those credentials (and the Basic
token the client sends for them) for `redact`, so a server that echoes them is redacted too.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import threading
from urllib.parse import unquote, unquote_plus

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


#: Query keys whose values are credentials, searched in the key's lower-cased, percent-decoded
#: name (`api_key`, `key`, `access_token`, `X-Amz-Signature`, `sig`, `password`, ...).
CREDENTIAL_KEY = re.compile(r"key|token|secret|passw|pwd|auth|credential|session|signature|(?<![a-z])sig(?![a-z])")
#: A URL's userinfo: after an optional `scheme://`, everything up to the last `@` of the host part.
_USERINFO = re.compile(r"^((?:[A-Za-z][A-Za-z0-9+.-]*:)?//)?([^/?#]*)@")
_QUERY_ITEM = re.compile(r"([^&;=#]*)=([^&;#]*)")
#: A URL's credential shorter than this is not searched for in other texts (a short password
#: would redact ordinary words of raw outputs); the URL itself is always redacted.
MIN_REGISTERED = 8


def public_url(url: str) -> str:
    """`url` as margin may record or print it: `http://user:pw@host/v1?api_key=K` becomes
    `http://[redacted]@host/v1?api_key=[redacted]`. A URL holding no credential is returned
    unchanged, byte for byte, so the ids and cache keys recorded for it stay as they were."""
    userinfo, query = _credentials(url)
    if not userinfo and not query:
        return url
    shown = _USERINFO.sub(lambda m: f"{m.group(1) or ''}{REDACTED}@", url, count=1) if userinfo else url
    head, mark, rest = shown.partition("?")
    if not mark or not query:
        return shown
    body, hash_mark, fragment = rest.partition("#")
    body = _QUERY_ITEM.sub(lambda m: f"{m.group(1)}={REDACTED}" if _is_credential(m) else m.group(0), body)
    return f"{head}?{body}{hash_mark}{fragment}"


def published_url(url: str, field: str) -> str:
    """A URL that margin publishes as given (where a site or its snapshots live): refused, with
    its credentials redacted in the message, when it holds any."""
    if public_url(url) != url:
        raise InputError(f"{public_url(url)} holds a credential and would be published; give the URL without it",
                         field=field)
    return url


def register_url(url: str) -> None:
    """Register a URL's credentials for `redact`: its userinfo, password and the Basic token an
    HTTP client sends for them, and its credential query values (each as written and decoded)."""
    userinfo, query = _credentials(url)
    found: list[str] = []
    if userinfo:
        user, _, password = userinfo.partition(":")
        found += [userinfo, unquote(userinfo), password, unquote(password),
                  base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()]
    for value in query:
        found += [value, unquote_plus(value)]
    for secret in found:
        if len(secret) >= MIN_REGISTERED:
            register(secret)


def _credentials(url: str) -> tuple[str, list[str]]:
    """A URL's userinfo ("" when none) and the values of its credential query keys."""
    match = _USERINFO.match(url)
    userinfo = match.group(2) if match else ""
    _, mark, rest = url.partition("?")
    query = [m.group(2) for m in _QUERY_ITEM.finditer(rest.partition("#")[0]) if _is_credential(m)] if mark else []
    return userinfo, query


def _is_credential(item: re.Match[str]) -> bool:
    return bool(item.group(2)) and CREDENTIAL_KEY.search(unquote_plus(item.group(1)).lower()) is not None


def redact(text: str) -> str:
    # Longest first: `user:password` goes whole, whichever order the set holds them in.
    for secret in sorted(_secrets, key=len, reverse=True):
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
