"""margin against software and weights no one here wrote: llama.cpp's own llama-server serving
SmolLM2-135M-Instruct on 127.0.0.1 (issue 31, items 1-5 and 7).

Marked `real`; they skip, saying why, where the binary or the GGUF is absent
(tests/support/llama_server.py says where each is looked for). Runs are tiny (--limit 2 to
4, replies of one or two tokens), and no assertion depends on how fast the server is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from margin.backends.generation import GuardRequest
from margin.backends.http import AsyncEndpoint
from margin.backends.openai_http import OpenAIChatBackend
from margin.guards.make import describe_guard, parse_guard_spec
from margin.guards.served_spec import served_spec
from tests.support import llama_server
from tests.support.cli import margin
from tests.support.paths import REPO

pytestmark = [pytest.mark.real, pytest.mark.slow]
if llama_server.missing():
    pytestmark.append(pytest.mark.skip(reason=str(llama_server.missing())))

GUARD_FILE = REPO / "studies" / "smollm2-guard.yaml"
SUITE = Path(__file__).with_name("tiny-suite.yaml")  # two candidates per prompt
GRAMMAR = 'root ::= "0" | "1"'


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    running = llama_server.LlamaServer(llama_server.free_port(), tmp_path_factory.mktemp("llama") / "server.log")
    running.start()
    yield running
    running.stop()


def calls(run: Path) -> list[dict]:
    return [r for r in map(json.loads, (run / "receipts.jsonl").read_text().splitlines()) if r["kind"] == "call"]


def run_guard(guard: str, url: str, out: Path, cache: Path, *args: str):
    return margin("run", "--guard", guard, "--base-url", url, "--dataset", "sample", "--suite", str(SUITE),
                  "--limit", "2", "--out", str(out), "--engine", "local", *args,
                  env={"MARGIN_CACHE_DIR": str(cache)})


def test_the_server_states_what_it_serves_and_that_is_the_guard_s_identity(server):
    spec = served_spec(parse_guard_spec(str(GUARD_FILE), base_url=server.base_url))
    facts = dict(spec.served)
    assert facts["server.kind"] == "llama.cpp" and facts["server.model_file"] == llama_server.GGUF_NAME
    assert facts["server.build"] and len(facts["server.chat_template_sha256"]) == 64
    info = describe_guard(spec)
    assert info.revision.startswith("served:") and not any("pin" in c for c in info.caveats)
    assert dict(info.params)["server.model_file"] == llama_server.GGUF_NAME
    # Asked again, the same server states the same facts (nothing volatile is kept).
    assert served_spec(parse_guard_spec(str(GUARD_FILE), base_url=server.base_url)).served == spec.served


def test_a_name_the_server_does_not_serve_is_one_error_naming_the_one_it_does(server, tmp_path):
    proc = run_guard(str(GUARD_FILE), server.base_url, tmp_path / "run", tmp_path / "cache", "--model", "llama")
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()[-1:]
    assert "does not serve 'llama'" in line and "'smollm2'" in line
    assert not (tmp_path / "run").exists()


def test_a_grammar_guard_never_has_a_score_against_its_reply(server, tmp_path):
    """Item 1 and 3 on the real server: request_options' grammar reaches it (every reply is
    0 or 1), and a p_unsafe, where the logprobs hold both labels, never silently disagrees
    with the reply's text: a threshold decision against it keeps the text as `reply`."""
    out = tmp_path / "run"
    proc = run_guard(str(GUARD_FILE), server.base_url, out, tmp_path / "cache", "--search", "exhaustive")
    assert proc.returncode == 0, proc.stderr
    answered = [c for c in calls(out) if c["verdict"] is not None]
    assert answered and len(answered) == len(calls(out))  # every call answered, none missing
    for call in answered:
        assert call["raw"] in ("0", "1"), call  # the grammar held
        said = "unsafe" if call["raw"] == "1" else "safe"
        if call["p_unsafe"] is None:
            assert call["verdict"] == said and "reply" not in call
        elif (call["p_unsafe"] >= 0.5) != (said == "unsafe"):
            assert call["verdict"] != said and call["reply"] == said  # counted, never silently resolved
        else:
            assert call["verdict"] == said and "reply" not in call


def test_completions_logprobs_in_llama_cpp_s_shape_are_read(server):
    """Item 1: llama.cpp answers /completions with chat-shaped logprobs; margin reads them."""
    backend = OpenAIChatBackend(AsyncEndpoint(server.base_url, None), llama_server.ALIAS, top_logprobs=5)
    (output,) = backend.generate([GuardRequest(prompt="The capital of France is", max_new_tokens=2)])
    assert not isinstance(output, Exception), output
    assert len(output.steps) >= 1 and all(len(step.top) >= 1 for step in output.steps)
    assert "".join(step.token for step in output.steps) == output.text


def test_a_text_over_the_context_is_one_attempt_naming_the_cause_and_the_fix(server, tmp_path):
    """Item 5: no retry makes a prompt fit the server's context (`-c 2048 -np 2`: 1,024 tokens a
    slot), so the text is one attempt naming the cause and the fix, then missing; the short
    text beside it gets its verdict."""
    dataset = tmp_path / "long.csv"
    dataset.write_text("id,prompt,type,label\nlong,\"" + "Tell me about the river and the hill. " * 300
                       + "\",t,unsafe\nshort,How do I bake bread?,t,safe\n")
    out = tmp_path / "run"
    proc = margin("run", "--guard", str(GUARD_FILE), "--base-url", server.base_url, "--dataset", str(dataset),
                  "--suite", str(SUITE), "--out", str(out), "--engine", "local", "--max-missing", "1",
                  env={"MARGIN_CACHE_DIR": str(tmp_path / "cache")})
    records = calls(out)
    long = [c for c in records if c["prompt_id"] == "long"]
    assert long and all(c["verdict"] is None and c["attempt"] == 1 for c in long), proc.stderr
    assert all("not retried" in c["error"] and "larger context" in c["error"] for c in long)
    assert any(c["prompt_id"] == "short" and c["verdict"] is not None for c in records)


def test_a_restart_of_the_same_port_with_another_grammar_or_template_reuses_no_verdict(tmp_path):
    """Item 2: the served name stays `smollm2` across restarts; what it serves does not."""
    port = llama_server.free_port()
    plain = tmp_path / "plain.yaml"  # no request grammar: the server's own defaults decide
    plain.write_text("\n".join(line for line in GUARD_FILE.read_text().splitlines()
                               if not line.startswith(("id:", "request_options", "  grammar"))) + "\n")
    cache = tmp_path / "cache"
    server = llama_server.LlamaServer(port, tmp_path / "server.log")
    runs: dict[str, list[dict]] = {}
    for name, args in (("first", ()), ("again", ()), ("grammar", ("--grammar", GRAMMAR)),
                       ("template", ("--chat-template", "chatml"))):
        server.start(*args)
        try:
            proc = run_guard(str(plain), server.base_url, tmp_path / name, cache)
        finally:
            server.stop()
        assert proc.returncode == 0, proc.stderr
        runs[name] = calls(tmp_path / name)
    ids = {name: {c["guard_id"] for c in records} for name, records in runs.items()}
    assert ids["first"] == ids["again"] and len({*ids["first"], *ids["grammar"], *ids["template"]}) == 3
    assert all(c["cached"] for c in runs["again"])  # the same server restarted: its verdicts are reused
    for name in ("first", "grammar", "template"):
        assert not any(c["cached"] for c in runs[name]), name  # another grammar or template: none reused
    assert all(c["raw"] in ("0", "1") for c in runs["grammar"])  # the server-wide grammar held


def test_the_real_small_study_runs_end_to_end(server, tmp_path):
    """Item 7: studies/real-small.yaml, SmolLM2 as guard, protected model and judge, on this
    server (its port put in a copy of the config and the guard file)."""
    for name in ("real-small.yaml", "smollm2-guard.yaml"):
        text = (REPO / "studies" / name).read_text()
        (tmp_path / name).write_text(text.replace("http://127.0.0.1:8090/v1", server.base_url))
    out = tmp_path / "study"
    proc = margin("study", str(tmp_path / "real-small.yaml"), "--out", str(out), "--engine", "local",
                  env={"MARGIN_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    pairings = json.loads((out / "pairings.json").read_text())
    (pair,) = pairings["data"]
    assert pair["coverage"]["complete"], pair["coverage"]  # every verdict, response and judgement came back
    assert pair["status"] in ("bypass_found", "no_bypass_found") and pair["transformations_tested"] == 2
    cases = [json.loads(line) for line in (out / "cases.jsonl").read_text().splitlines()]
    assert len(cases) == 8  # 4 prompts x 2 transformations
