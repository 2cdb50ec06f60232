"""Scores never contradict a reply unnoticed: p_unsafe only from logprobs holding every
decision label, a threshold deciding against the reply's text is kept in `reply` (receipts,
cache, report counts), both /completions logprob shapes are read, and a guard whose outputs
carry no usable logprobs says so once."""

from __future__ import annotations

import json
import logging
import math

from margin.backends.generation import Generation, Step, label_mass, share
from margin.backends.openai_http import completion_generation
from margin.guards.adapters.llama_guard import LlamaGuard
from margin.guards.generative import GenerativeGuard
from margin.reports.observations import coverage, read_calls
from margin.reports.tables import coverage_record
from margin.runfolder import call_line, call_record
from margin.serving.verdict_cache import VerdictCache
from margin.types import Candidate, GuardCall, GuardInfo, Verdict


class Scripted:
    """A backend that answers every request with the next scripted Generation."""

    top_logprobs = 20

    def __init__(self, outputs: list[Generation]) -> None:
        self.outputs = list(outputs)

    def generate(self, requests):  # noqa: ANN001
        return [self.outputs.pop(0) for _ in requests]

    def close(self) -> None:
        pass


def lg_output(text: str, top: dict[str, float]) -> Generation:
    return Generation(text=text, steps=(Step(text, tuple((t, math.log(p)) for t, p in top.items())),))


def guard(outputs: list[Generation], threshold: float | None = 0.5) -> GenerativeGuard:
    info = GuardInfo(id="lg", family="llama-guard", checkpoint="x", revision="1", backend="openai",
                     threshold=threshold)
    return GenerativeGuard(LlamaGuard("3-8b"), Scripted(outputs), info)


def test_a_label_missing_from_the_top_logprobs_gives_no_score():
    step = Step("0", (("0", math.log(0.6)), ("the", math.log(0.3))))
    assert share(label_mass(step, ("1", "0")), ("1",)) is None  # '1' unknown, not zero
    both = Step("0", (("0", math.log(0.6)), ("1", math.log(0.2))))
    assert share(label_mass(both, ("1", "0")), ("1",)) == 0.25


def test_a_reply_missing_a_label_keeps_its_text_and_warns_once(caplog):
    outputs = [lg_output("safe", {"safe": 0.5, "I": 0.4}), lg_output("unsafe", {"unsafe": 0.9})]
    with caplog.at_level(logging.WARNING, logger="margin.guards.generative"):
        verdicts = guard(outputs).classify(["a", "b"])
    assert [(v.label, v.p_unsafe, v.reply) for v in verdicts] == [("safe", None, None), ("unsafe", None, None)]
    warnings = [r for r in caplog.records if "every decision label" in r.getMessage()]
    assert len(warnings) == 1


def test_a_threshold_against_the_reply_is_kept_and_counted(tmp_path):
    # The text says safe, yet the score over both labels is 0.7: the threshold decides, the
    # reply's own label stays with the verdict.
    outputs = [lg_output("safe", {"safe": 0.3, "unsafe": 0.7}), lg_output("safe", {"safe": 0.8, "unsafe": 0.2})]
    against, agrees = guard(outputs).classify(["a", "b"])
    assert (against.label, against.reply) == ("unsafe", "safe") and abs(against.p_unsafe - 0.7) < 1e-9
    assert (agrees.label, agrees.reply) == ("safe", None)

    calls = [GuardCall(Candidate(pid, None, None, 0, pid, 0.0), v, 1, 0.1) for pid, v in (("p1", against), ("p2", agrees))]
    lines = [json.loads(call_line('{"kind": "call", "run_id": "r", "guard_id": "lg", ', c)) for c in calls]
    assert lines[0]["reply"] == "safe" and "reply" not in lines[1]
    assert [call_record("r", "lg", c) for c in calls] == lines
    covered = coverage(read_calls(lines))
    assert (covered.contradicted, covered.unscored) == (1, 0)
    candidates = coverage_record([], covered).candidates
    assert candidates is not None and candidates.against_reply == 1

    cache = VerdictCache(tmp_path / "v.sqlite", GuardInfo(id="lg", family="f", checkpoint="c", revision="1", backend="b"))
    cache.put_many([("a", against), ("b", agrees)])
    assert cache.get("a") == against and cache.get("b").reply is None
    cache.put_many([("a", against._replace(label="safe", reply=None))])
    assert cache.get("a").reply is None  # a replaced verdict drops the old reply
    cache.close()


def test_unscored_verdicts_are_counted_only_for_a_guard_that_scores():
    def line(pid: str, p: float | None) -> dict:
        return {"kind": "call", "prompt_id": pid, "transform": None, "strength": None, "seed": 0,
                "verdict": "safe", "p_unsafe": p, "attempt": 1, "cached": False}

    assert coverage(read_calls([line("a", 0.1), line("b", None)])).unscored == 1
    assert coverage(read_calls([line("a", None), line("b", None)])).unscored == 0  # a guard with no scores at all
    assert "without_p_unsafe" not in coverage_record([], coverage(read_calls([line("a", 0.1)]))).document()["candidates"]


def test_completions_read_both_logprob_shapes():
    legacy = {"choices": [{"text": "1", "finish_reason": "stop", "logprobs": {
        "tokens": ["1"], "token_logprobs": [math.log(0.7)], "top_logprobs": [{"1": math.log(0.7), "0": math.log(0.2)}]}}]}
    chat = {"choices": [{"text": "1", "finish_reason": "stop", "logprobs": {"content": [
        {"token": "1", "logprob": math.log(0.7), "top_logprobs": [{"token": "1", "logprob": math.log(0.7)},
                                                                {"token": "0", "logprob": math.log(0.2)}]}]}}]}
    for response in (legacy, chat):
        steps = completion_generation(response).steps
        assert len(steps) == 1 and steps[0].token == "1"
        assert abs(share(label_mass(steps[0], ("1", "0")), ("1",)) - 0.7 / 0.9) < 1e-9


def test_llama_guard_sends_plain_content_when_asked():
    assert isinstance(LlamaGuard("3-1b").request("x").messages[0]["content"], list)
    assert LlamaGuard("3-1b", {"content": "text"}).request("x").messages[0]["content"] == "x"
    assert Verdict("safe").reply is None
