"""What an OpenAI-compatible server says it serves: part of the identity of what it serves.

A served name (`--model smollm2`) says nothing about the weights behind it: restart the same
port with another GGUF, chat template or server-wide grammar and the name stays. So at start
margin asks the server (`read_server`) and turns its answers into facts (`server_facts`, a
pure function) that go into the guard's id and the verdict cache's key, and into a study
model's identity and the response cache's key:

- `GET /v1/models`: the served name must be one of its ids (or a llama.cpp alias);
- llama.cpp's `GET /props`: the model file, the chat template, the build and the server-wide
  sampling defaults; the defaults a request gets but `/props` leaves out (a `--grammar`, stop
  strings, logit biases) come from one one-token `POST /completion`, whose
  `generation_settings` holds them all;
- vLLM: the model's `root` (the checkpoint it loaded) and `max_model_len`, and `GET /version`.

A server without `/v1/models` states nothing: no facts, and the guard keeps its id and its
revision caveat. Anything volatile (creation times, slot counts, the slot context) is left
out, so the same server started twice gives the same facts.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from margin.backends.secrets import public_url, read_api_key, redact
from margin.errors import EndpointUnreachable, InputError
from margin.util.hashing import canonical_json, sha256_text

#: Facts as (key, value) pairs, sorted: hashable, picklable, and how GuardInfo.params holds them.
Facts = tuple[tuple[str, str], ...]

#: What a fact key starts with in a guard's params (`server.model_file`).
PREFIX = "server."
#: Which facts say what model the server loaded (then no "pin a revision" caveat applies).
STATES_MODEL = ("server.model_file", "server.model_root")
#: /v1/models `meta` keys that depend on how the server was started, not on the weights.
RUNTIME_META = frozenset({"n_ctx"})
#: The one-token request that shows a llama.cpp server's request defaults.
PROBE = {"prompt": "0", "n_predict": 1, "cache_prompt": False, "temperature": 0}


class NotServed(InputError):
    """The served name is not among those the server lists."""


def root_url(base_url: str) -> str:
    """The server's root (llama.cpp's /props and vLLM's /version live there, not under /v1)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def served_names(models: Any) -> list[str]:
    """Every name a `/v1/models` body lets a request use: ids, and llama.cpp's aliases."""
    names: list[str] = []
    for entry in (models.get("data") if isinstance(models, dict) else None) or []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            names.append(entry["id"])
            names.extend(a for a in entry.get("aliases") or [] if isinstance(a, str))
    return list(dict.fromkeys(names))


def _entry(models: Any, model: str) -> dict[str, Any]:
    for entry in (models.get("data") if isinstance(models, dict) else None) or []:
        if isinstance(entry, dict) and (entry.get("id") == model or model in (entry.get("aliases") or [])):
            return entry
    return {}


def server_facts(model: str, base_url: str, models: Any, props: Any = None, settings: Any = None,
                 version: Any = None) -> Facts:
    """The facts a server's answers give about `model` (None: that endpoint did not answer).
    Raises NotServed, naming what it serves, when `model` is not listed."""
    if models is None:  # states nothing: the guard is named as before, with its revision caveat
        return ()
    names = served_names(models)
    if model not in names:
        listed = ", ".join(repr(n) for n in names) or "nothing"
        raise NotServed(f"the server at {public_url(base_url)} does not serve {model!r}; it serves {listed} "
                        f"(GET /v1/models): give one of them as the model", field="--model")
    entry = _entry(models, model)
    facts: dict[str, str] = {}
    if isinstance(props, dict) and ("model_path" in props or "build_info" in props):
        facts["kind"] = "llama.cpp"
        facts["model_file"] = posixpath.basename(str(props.get("model_path", "")).replace("\\", "/"))
        meta = entry.get("meta")
        if isinstance(meta, dict):
            facts["model_meta"] = canonical_json({k: v for k, v in meta.items() if k not in RUNTIME_META})
        facts["chat_template_sha256"] = sha256_text(str(props.get("chat_template", "")))
        facts["build"] = str(props.get("build_info", ""))
        general = props.get("default_generation_settings")
        defaults = dict(general.get("params") or {}) if isinstance(general, dict) else {}
        per_request = settings.get("generation_settings") if isinstance(settings, dict) else None
        if isinstance(per_request, dict):  # what /props leaves out (grammar, stop, logit_bias)
            defaults = {**{k: v for k, v in per_request.items() if k not in PROBE_ECHO}, **defaults}
        else:
            defaults["generation_settings"] = "not read"
        facts["defaults_sha256"] = sha256_text(canonical_json(defaults))
        if defaults.get("grammar"):
            facts["grammar_sha256"] = sha256_text(str(defaults["grammar"]))
    else:
        owner = entry.get("owned_by")
        facts["kind"] = "vllm" if owner == "vllm" else "openai-compatible"
        if isinstance(entry.get("root"), str):
            facts["model_root"] = entry["root"]
        if entry.get("max_model_len") is not None:
            facts["max_model_len"] = str(entry["max_model_len"])
        if isinstance(owner, str):
            facts["owned_by"] = owner
        if isinstance(version, dict) and isinstance(version.get("version"), str):
            facts["version"] = version["version"]
    return tuple(sorted((PREFIX + k, v) for k, v in facts.items()))


#: Settings the probe itself sets: the request's, not the server's.
PROBE_ECHO = frozenset({"n_predict", "max_tokens", "temperature", "stream"})


def states_model(facts: Facts) -> bool:
    return any(key in STATES_MODEL and value for key, value in facts)


def read_server(base_url: str, api_key_env: str | None, model: str, *, timeout_s: float = 120.0,
                who: str = "guard") -> Facts:
    """Ask the server at `base_url` what it serves under `model` (see the module's text).
    One line (InputError) when it cannot be reached or does not serve `model`."""
    import httpx

    key = read_api_key(api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    root = root_url(base_url)
    with httpx.Client(timeout=timeout_s, headers=headers) as client:
        models = _get(client, base_url.rstrip("/") + "/models", base_url, required=True, who=who)
        if models is None:
            return server_facts(model, base_url, None)
        props = _get(client, root + "/props", base_url)
        settings = version = None
        if isinstance(props, dict) and ("model_path" in props or "build_info" in props):
            settings = _ask(client, "POST", root + "/completion", base_url, json=PROBE)
        else:
            version = _get(client, root + "/version", base_url)
    return server_facts(model, base_url, models, props, settings, version)


def _get(client: Any, url: str, base_url: str, *, required: bool = False, who: str = "guard") -> Any:
    return _ask(client, "GET", url, base_url, required=required, who=who)


def _ask(client: Any, method: str, url: str, base_url: str, *, required: bool = False,
         json: Mapping[str, Any] | None = None, who: str = "guard") -> Any:
    """The JSON body at `url`, or None where the server does not serve it (a 404, 405 or 501,
    or a body that is not JSON). Unreachable, or refusing the key: one line."""
    import httpx

    try:
        response = client.request(method, url, json=json)
    except httpx.ConnectError as exc:
        raise EndpointUnreachable(redact(f"{who} at {public_url(base_url)} refused the connection: is the server running, "
                                         f"and is the URL right? ({method} {public_url(url)}: {exc})"),
                                  field="--base-url") from None
    except httpx.HTTPError as exc:
        raise InputError(redact(f"cannot read what the server at {public_url(base_url)} serves ({method} {public_url(url)}: "
                                f"{type(exc).__name__}: {exc}); start it, or fix the URL, and run again"),
                         field="--base-url") from None
    if response.status_code in (401, 403):
        raise InputError(f"the server at {public_url(base_url)} refused the key ({method} {public_url(url)}: HTTP {response.status_code}); "
                         "set the variable --api-key-env names", field="--api-key-env")
    if response.status_code >= 400:
        if required and response.status_code not in (404, 405, 501):
            raise InputError(redact(f"the server at {public_url(base_url)} answered {method} {public_url(url)} with HTTP "
                                    f"{response.status_code}: {response.text[:200]}"), field="--base-url")
        return None
    try:
        return response.json()
    except ValueError:
        return None
