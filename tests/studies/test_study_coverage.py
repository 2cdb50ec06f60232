"""A study whose model gives no output stops at once and says which and why; a pair with
missing outputs is marked incomplete in pairings.json, refused by `margin publish` unless
told otherwise, and drawn by the site as incomplete, never as none found. Real HTTP servers
on 127.0.0.1 (the example's toy models, tests/support/openai_server.py), the real CLI."""

from __future__ import annotations

import json
import re
import socket
import threading
from pathlib import Path

import pytest

from margin.errors import EndpointUnreachable
from margin.studies.health import Health, ModelUnavailable
from margin.studies.plan import plan_study
from margin.studies.runner import CoverageError, check_coverage, run_study
from tests.support.cli import margin
from tests.support.openai_server import FakeOpenAI
from tests.support.study import study_config, toy_module, toy_server, write_config

FAILING_GUARD = '''
class Down:
    def classify(self, texts):
        raise ConnectionError("guard endpoint refused the connection")
'''


def closed_port_url() -> str:
    """A URL nothing listens on: every connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_study_whose_model_endpoint_was_never_there_stops_at_once_naming_it(tmp_path):
    """Nothing listens at the model's URL from the start: one line naming the model and its
    URL, exit 2, and no study folder left (a wrong URL waits for no outage to end)."""
    model_url = closed_port_url()
    with toy_server() as judge_url:
        path = write_config(tmp_path, study_config(model_url, judge_url=judge_url))
        out = tmp_path / "out"
        done = margin("study", str(path), "--out", str(out), "--engine", "local", "--no-cache")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert f"toy-medium at {model_url} refused the connection" in line
    assert not out.exists()


@pytest.mark.slow  # two studies in subprocesses, about 6 s of CPU
def test_a_study_whose_model_goes_down_stops_and_resume_finishes_it(tmp_path):
    """The model answers a few requests, then fails every one (its canary too) for longer
    than max_outage: the study stops naming the endpoint and the exact --resume, publish
    refuses the unfinished folder, and --resume finishes it once the model answers again."""
    toy = toy_module()
    state = {"answered": 0, "down": False}
    lock = threading.Lock()

    def fault(text: str, attempt: int) -> str | None:
        with lock:
            if state["down"]:
                return "500"
            state["answered"] += 1
            state["down"] = state["answered"] >= 3
            return None

    model = FakeOpenAI(lambda text: toy.assistant("toy-medium", text), fault=fault)
    with model, toy_server() as judge_url:
        config = study_config(model.base_url, judge_url=judge_url)
        config["runtime"]["max_outage_s"] = 1
        path = write_config(tmp_path, config)
        out = tmp_path / "out"
        done = margin("study", str(path), "--out", str(out), "--engine", "local", "--no-cache")
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"--out {out} --resume" in done.stderr
        assert not (out / "pairings.json").exists()  # no pairs drawn from nothing
        refused = margin("publish", str(out), "--out", str(tmp_path / "published"))
        assert refused.returncode == 2 and "did not finish" in refused.stderr
        assert f"--out {out} --resume" in refused.stderr
        with lock:
            state["down"], state["answered"] = False, -10**9  # the model is back
        resumed = margin("study", str(path), "--out", str(out), "--engine", "local", "--no-cache", "--resume")
    assert resumed.returncode == 0, resumed.stderr
    pairings = json.loads((out / "pairings.json").read_text("utf-8"))
    assert pairings["data"][0]["coverage"]["complete"] is True


def test_a_study_whose_judge_is_down_stops_naming_the_judge_and_its_endpoint(tmp_path):
    judge_url = closed_port_url()
    with toy_server() as url:
        plan = plan_study(write_config(tmp_path, study_config(url, judge_url=judge_url)))
        with pytest.raises(EndpointUnreachable, match=rf"judge\S* at {re.escape(judge_url)} refused the connection"):
            run_study(plan, tmp_path / "out", engine="local", cache=False)
    assert not (tmp_path / "out").exists()  # a judge that was never there leaves no study folder


def test_a_study_whose_guard_gives_no_verdict_stops_naming_the_guard(tmp_path):
    (tmp_path / "down.py").write_text(FAILING_GUARD)
    with toy_server() as url:
        plan = plan_study(write_config(tmp_path, study_config(url, guard="python:down.py:Down")))
        with pytest.raises(ModelUnavailable, match="guard .*Down.* gave no verdict at all; its first error: "
                                                   ".*refused the connection"):
            run_study(plan, tmp_path / "out", engine="local", cache=False)


def test_health_waits_for_a_models_first_requests_and_any_answer_clears_it():
    health = Health(first=3)
    for _ in range(5):
        health.ask("m")
    health.recorded("m", "HTTP 500")
    health.told("m", None)
    health.told("m", None)
    with pytest.raises(ModelUnavailable, match="model m answered none of its first 3 requests.*HTTP 500"):
        health.told("m", None)
    alive = Health(first=2)
    alive.told("a", "an answer")
    alive.told("a", None)
    alive.told("a", None)  # it answered once: a failure later is lost coverage, not a dead model
    small = Health(first=8)
    small.ask("s")
    small.seal("s")
    with pytest.raises(ModelUnavailable, match="first 1 requests"):
        small.told("s", None)  # a model asked fewer than `first` fails on all it was asked


@pytest.fixture(scope="module")
def incomplete_study(tmp_path_factory) -> Path:
    """toy-medium answers every original but no text holding a zero-width space: every
    transformed response is missing, so preservation has no units at all."""
    tmp = tmp_path_factory.mktemp("study")
    toy = toy_module()
    model = FakeOpenAI(lambda text: toy.assistant("toy-medium", text),
                       fault=lambda text, attempt: "500" if "\u200b" in text else None)
    with model, toy_server() as judge_url:
        plan = plan_study(write_config(tmp, study_config(model.base_url, judge_url=judge_url)))
        outcome = run_study(plan, tmp / "out", engine="local", cache=False)
    with pytest.raises(CoverageError, match=r"first errors: model toy-medium: .*500"):
        check_coverage(outcome, plan.config.runtime.max_missing)  # margin study exits 1 saying so
    return tmp / "out"


def test_an_incomplete_pair_says_what_is_missing_and_why(incomplete_study):
    pairings = json.loads((incomplete_study / "pairings.json").read_text("utf-8"))
    [record] = pairings["data"]
    coverage = record["coverage"]
    assert coverage["asked"] == {"guard_verdicts": 24, "responses": 24, "judge_outputs": 0}
    assert coverage["missing"] == {"guard_verdicts": 0, "responses": 12, "judge_outputs": 0}
    assert coverage["complete"] is False and coverage["reason"].startswith("model toy-medium: ")
    assert "500" in coverage["reason"]
    [row] = record["transformations"]
    assert row["defined"]["preservation"] is False  # reported as 0 in the JSON, with no units


def test_publish_refuses_an_incomplete_pair_and_the_site_never_draws_it_as_none_found(incomplete_study, tmp_path):
    out, site = tmp_path / "published", tmp_path / "site"
    refused = margin("publish", str(incomplete_study), "--out", str(out))
    assert refused.returncode == 2 and not out.exists()
    [line] = refused.stderr.strip().splitlines()
    assert "keyword x toy-medium: responses 12/24 (50.0%)" in line and "--allow-incomplete" in line
    done = margin("publish", str(incomplete_study), "--out", str(out), "--allow-incomplete")
    assert done.returncode == 0, done.stderr
    assert "1 incomplete (marked)" in done.stdout
    assert json.loads((out / "pairings.json").read_text("utf-8"))["data"][0]["coverage"]["complete"] is False
    assert margin("site", str(out), "--out", str(site)).returncode == 0
    html = (site / "index.html").read_text("utf-8")  # pairings only: the index is the pairings page
    cell = html[html.index('<td class="cell'):]
    cell = cell[:cell.index("</td>")]
    assert 'data-status="incomplete"' in cell and "none found" not in cell
    assert "incomplete evidence: responses 12/24" in cell
    assert 'id="incomplete-note"' in html
    evidence = html[html.index('<details class="evidence pair"'):]
    row = evidence[evidence.index("zero-width-space:100%</th>"):]
    cells = re.findall(r"<td>(.*?)</td>", row[:row.index("</tr>")])
    assert cells[2] == '— <span class="ci">no units</span>'  # preservation: nothing judged, not 0.0%


def test_a_pairings_file_without_coverage_is_judged_by_its_missing_counts(incomplete_study, tmp_path):
    """A pairings.json written before pairs recorded coverage: its counts still show the gap."""
    pairings = json.loads((incomplete_study / "pairings.json").read_text("utf-8"))
    del pairings["data"][0]["coverage"]
    old = tmp_path / "old-pairings.json"
    old.write_text(json.dumps(pairings), encoding="utf-8")
    refused = margin("publish", str(old), "--out", str(tmp_path / "published"))
    assert refused.returncode == 2 and "12 missing outputs counted over its transformations" in refused.stderr
    out, site = tmp_path / "allowed", tmp_path / "site"
    assert margin("publish", str(old), "--out", str(out), "--allow-incomplete").returncode == 0
    assert margin("site", str(out), "--out", str(site)).returncode == 0
    assert 'data-status="incomplete"' in (site / "index.html").read_text("utf-8")
