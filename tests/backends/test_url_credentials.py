"""Credentials in a URL never leave the process: a guard run against a real server on
127.0.0.1 through `http://user:password@host/v1` calls it with them, but every file margin
writes (run folder, verdict cache, exports, snapshots, site pages and JSON API) and every
line it prints holds only the redacted URL, and an echo of the Basic token is redacted too."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
from pathlib import Path

import pytest

from margin.backends.secrets import public_url, published_url, redact, register_url
from margin.cli.common import resume_command
from margin.errors import InputError
from margin.guards.make import describe_guard, parse_guard_spec
from margin.studies.models import ModelSpec, model_identity
from tests.support.cli import margin
from tests.support.openai_server import FakeOpenAI

USER, PASSWORD = "alice", "SECRETPASS-5f1e"
EXT = {"inspect": "json", "garak": "jsonl", "jbb": "json", "sarif": "sarif", "junit": "xml"}
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@pytest.mark.parametrize(("url", "shown"), [
    ("http://alice:pw@host/v1", "http://[redacted]@host/v1"),
    ("https://TOKEN123@host:8443/v1", "https://[redacted]@host:8443/v1"),
    ("http://u:p@ss@host/v1", "http://[redacted]@host/v1"),  # an unencoded @ in the password
    ("u:p@host:1/v1", "[redacted]@host:1/v1"),  # no scheme
    ("http://h/v1?api-version=2024-02-01&api_key=K1&key=K2&access_token=T#x",
     "http://h/v1?api-version=2024-02-01&api_key=[redacted]&key=[redacted]&access_token=[redacted]#x"),
    ("http://h/v1?X-Amz-Signature=abc&sig=1&Password=p&designation=d",
     "http://h/v1?X-Amz-Signature=[redacted]&sig=[redacted]&Password=[redacted]&designation=d"),
])
def test_public_url_redacts_userinfo_and_credential_query_values(url, shown):
    assert public_url(url) == shown


@pytest.mark.parametrize("url", ["http://127.0.0.1:8000/v1", "https://api.openai.com/v1", "http://h/v1?",
                                 "http://h/a@b", "http://h/v1?key=", "http://[::1]:80/v1?api-version=1"])
def test_a_url_without_credentials_is_kept_byte_for_byte(url):
    # so the guard ids, verdict-cache keys and reference hashes of ordinary runs do not change
    assert public_url(url) == url
    info = describe_guard(parse_guard_spec("llama-guard-3-8b", backend="openai", base_url=url))
    assert dict(info.params)["base_url"] == url


def test_a_credentialed_url_gives_the_same_guard_id_as_the_url_without_them():
    plain = describe_guard(parse_guard_spec("llama-guard-3-8b", backend="openai", base_url="http://h:1/v1"))
    secret = describe_guard(parse_guard_spec("llama-guard-3-8b", backend="openai",
                                             base_url=f"http://{USER}:{PASSWORD}@h:1/v1"))
    assert secret.id == plain.id and dict(secret.params)["base_url"] == "http://[redacted]@h:1/v1"


def test_a_study_model_identity_holds_the_redacted_url_and_keeps_a_plain_one():
    secret = model_identity(ModelSpec(model="m", base_url=f"http://{USER}:{PASSWORD}@h:1/v1"), 64)
    plain = model_identity(ModelSpec(model="m", base_url="http://h:1/v1"), 64)
    assert secret["base_url"] == "http://[redacted]@h:1/v1" and plain["base_url"] == "http://h:1/v1"
    assert PASSWORD not in json.dumps(secret)


def test_registered_url_credentials_are_redacted_from_any_text_but_short_ones_are_not():
    register_url("http://bob:hunter2-ab12cd@h/v1?api_key=qk-77ffee11&v=2&token=short")
    basic = base64.b64encode(b"bob:hunter2-ab12cd").decode()
    text = f"echo: Basic {basic}; bob:hunter2-ab12cd; hunter2-ab12cd; qk-77ffee11; short"
    assert redact(text) == "echo: Basic [redacted]; [redacted]; [redacted]; [redacted]; short"


def test_an_endpoint_that_refuses_the_connection_is_named_by_its_redacted_url(tmp_path):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = margin("run", "--guard", "llama-guard-3-8b", "--backend", "openai", "--base-url",
                  f"http://{USER}:{PASSWORD}@127.0.0.1:{port}/v1", "--engine", "local", "--suite", "quick",
                  "--limit", "4", "--max-outage", "2s", "--out", str(tmp_path / "run"))
    assert proc.returncode != 0
    assert f"http://[redacted]@127.0.0.1:{port}/v1" in proc.stderr and PASSWORD not in proc.stdout + proc.stderr
    assert _leaks(tmp_path, [PASSWORD, TOKEN, f"{USER}:"]) == []


def test_urls_that_are_published_as_given_refuse_credentials_without_showing_them():
    with pytest.raises(InputError) as caught:
        published_url(f"https://{USER}:{PASSWORD}@example.org/margin", "--base-url")
    assert PASSWORD not in str(caught.value) and "[redacted]" in str(caught.value)
    assert published_url("https://example.org/margin", "--base-url") == "https://example.org/margin"


def test_the_printed_resume_command_shows_no_credential():
    argv = ["run", "--guard", "g", "--base-url", f"http://{USER}:{PASSWORD}@h/v1", f"--base-url=http://{USER}:"
            f"{PASSWORD}@h/v1", "--out", "o"]
    line = resume_command("run", Path("o"), argv)
    assert PASSWORD not in line and line.count("http://[redacted]@h/v1") == 2


def _answer(text: str) -> str:
    # a careless server: echoes the request's Authorization header in some outputs
    if hashlib.sha256(text.encode()).digest()[0] % 2:
        return "\n\nunsafe\nS9 {auth}"
    return "\n\nsafe"


def _leaks(root: Path, needles: list[str]) -> list[str]:
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path.relative_to(root)}: {n}" for n in needles if n.encode() in data]
    return found


def test_a_credentialed_base_url_never_leaves_the_process(tmp_path):
    cache = tmp_path / "cache"
    env = {"MARGIN_CACHE_DIR": str(cache)}
    with FakeOpenAI(_answer) as server:
        url = server.base_url.replace("http://", f"http://{USER}:{PASSWORD}@")
        run = margin("run", "--guard", "llama-guard-3-8b", "--backend", "openai", "--base-url", url,
                     "--engine", "local", "--suite", "quick", "--limit", "6", "--out", str(tmp_path / "run"), env=env)
        auth = {r["path"] for r in server.requests}
    assert run.returncode == 0, run.stderr
    assert auth == {"/v1/chat/completions"}  # the calls went through the credentialed URL
    printed = [run.stdout + run.stderr]
    raws = [json.loads(line).get("raw") or "" for line in (tmp_path / "run" / "receipts.jsonl").read_text().splitlines()]
    assert any("Basic [redacted]" in raw for raw in raws)  # the server echoed the token: redacted
    record = json.loads((tmp_path / "run" / "run.json").read_text())
    assert dict(record["guard"]["params"])["base_url"] == server.base_url.replace("http://", "http://[redacted]@")
    commands = [("report", str(tmp_path / "run")),
                *[("export", str(tmp_path / "run"), "--format", f, "--out", str(tmp_path / "exports" / f"{f}.{EXT[f]}"))
                  for f in ("inspect", "garak", "jbb", "sarif", "junit")],
                ("publish", str(tmp_path / "run"), "--out", str(tmp_path / "pub")),
                ("site", str(tmp_path / "pub"), "--out", str(tmp_path / "site"))]
    for command in commands:
        proc = margin(*command, env=env)
        assert proc.returncode == 0, (command, proc.stderr)
        printed.append(proc.stdout + proc.stderr)
    for command in (("publish", str(tmp_path / "run"), "--out", str(tmp_path / "pub2")),
                    ("site", str(tmp_path / "pub"), "--out", str(tmp_path / "site2"))):
        refused = margin(*command, "--base-url", f"https://{USER}:{PASSWORD}@example.org/margin", env=env)
        assert refused.returncode == 2 and "https://[redacted]@example.org/margin" in refused.stderr, refused.stderr
        printed.append(refused.stdout + refused.stderr)
    assert (tmp_path / "site" / "index.html").is_file() and list(cache.iterdir())
    needles = [PASSWORD, TOKEN, f"{USER}:"]
    assert _leaks(tmp_path, needles) == []
    assert [n for n in needles for text in printed if n in text] == []
