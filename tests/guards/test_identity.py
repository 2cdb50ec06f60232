"""Identity a user controls: a guard file's `id` is the published id, a threshold tags the
default id, and a `python:` guard's declared weights, revision, threshold, scope and caveats
reach its identity, the verdict cache key, the snapshot, `margin report` and the site.

The third-party classifier here has the shape of a small TF-IDF prompt-injection detector
that ships its weights inside its package (as a wheel would): built in tmp_path, no download.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

import margin
from margin.errors import InputError
from margin.guards.make import build_guard, describe_guard, parse_guard_spec
from margin.serving.verdict_cache import guard_key
from margin.util.hashing import sha256_bytes, sha256_tree
from tests.support.cli import margin as margin_cli

SCOPE = "prompt-injection detector, not a harm classifier"

# A scikit-free TF-IDF scorer: sublinear term frequency times idf, L2-normalised, a logistic
# layer on top. Its weights file is the only thing a model upgrade changes.
DETECTOR = '''
import json, math, re
from pathlib import Path

WORD = re.compile(r"[a-z]+")


class Detector:
    def __init__(self, weights):
        data = json.loads(Path(weights).read_text("utf-8"))
        self.idf, self.coef, self.intercept = data["idf"], data["coef"], data["intercept"]

    def p_injection(self, text):
        counts = {}
        for word in WORD.findall(text.lower()):
            if word in self.idf:
                counts[word] = counts.get(word, 0) + 1
        vector = {w: (1 + math.log(n)) * self.idf[w] for w, n in counts.items()}
        norm = math.sqrt(sum(v * v for v in vector.values())) or 1.0
        z = self.intercept + sum(self.coef.get(w, 0.0) * v / norm for w, v in vector.items())
        return 1 / (1 + math.exp(-z))
'''

WRAPPER = '''
from margin import Verdict
from tfidf_injection import Detector


class InjectionGuard:
    def __init__(self, weights, threshold=0.5):
        # the package's folder or its weights file
        self.detector = Detector(weights / "weights.json" if weights.is_dir() else weights)
        self.threshold = threshold

    def classify(self, texts):
        out = []
        for text in texts:
            p = self.detector.p_injection(text)
            out.append(Verdict("unsafe" if p >= self.threshold else "safe", p_unsafe=p, raw=f"p={p:.6f}"))
        return out
'''

WEIGHTS = {"idf": {"ignore": 2.0, "instructions": 1.5, "previous": 1.8, "kill": 2.2, "bomb": 2.4, "poison": 2.3,
                   "how": 0.3, "the": 0.1},
           "coef": {"ignore": 4.0, "instructions": 3.0, "previous": 2.5, "kill": 3.5, "bomb": 3.5, "poison": 3.0,
                    "how": 0.2},
           "intercept": -1.5}


@pytest.fixture
def detector(tmp_path, monkeypatch):
    """The detector installed as a package would be, its weights inside it; the wrapper and a
    guard file beside each other. Returns the guard file's folder."""
    package = tmp_path / "site-packages" / "tfidf_injection"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(DETECTOR, encoding="utf-8")
    (package / "weights.json").write_text(json.dumps(WEIGHTS), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    monkeypatch.delitem(sys.modules, "tfidf_injection", raising=False)  # another test's copy
    monkeypatch.setenv("MARGIN_CACHE_DIR", str(tmp_path / "cache"))
    guards = tmp_path / "guards"
    guards.mkdir()
    (guards / "injection_guard.py").write_text(WRAPPER, encoding="utf-8")
    return guards


def guard_file(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("guard: python:injection_guard.py:InjectionGuard\n" + textwrap.dedent(body), encoding="utf-8")
    return path


FULL = f"""\
id: tfidf-injection
weights: package:tfidf_injection/weights.json
revision: "0.1.0"
threshold: 0.6
scope: {SCOPE}
caveats: [trained on English injection examples only]
"""


def test_a_python_guard_from_guard_file_to_snapshot_report_and_site(detector, tmp_path, monkeypatch):
    path = guard_file(detector, "tfidf.yaml", FULL)
    outcome = margin.run(str(path), suite="quick", engine="local", out=tmp_path / "run")
    weights = tmp_path / "site-packages" / "tfidf_injection" / "weights.json"
    snapshot = json.loads((tmp_path / "run" / "snapshot.json").read_text("utf-8"))
    entry = snapshot["data"][0]
    assert entry["id"] == "tfidf-injection" == outcome.snapshot.document()["data"][0]["id"]
    evaluation = entry["evaluation"]
    assert evaluation["scope"] == SCOPE and "trained on English injection examples only" in evaluation["caveats"]
    assert evaluation["threshold"] == 0.6 and evaluation["revision"].startswith("0.1.0+wrapper.")
    assert evaluation["params"] == {"weights": "package:tfidf_injection/weights.json",
                                    "weights_sha256": sha256_bytes(weights.read_bytes())}
    run_json = json.loads((tmp_path / "run" / "run.json").read_text("utf-8"))
    assert run_json["guard"]["scope"] == SCOPE
    # the detector's verdicts, at the declared threshold: some unsafe prompts are caught
    assert entry["clean_accuracy"]["unsafe"] > 0

    monkeypatch.setenv("COLUMNS", "200")  # table cells unwrapped
    report = margin_cli("report", str(tmp_path / "run"))
    assert report.returncode == 0, report.stderr
    assert SCOPE in report.stdout and "trained on English injection examples only" in report.stdout

    published = margin_cli("publish", str(tmp_path / "run"), "--out", str(tmp_path / "pub"))
    assert published.returncode == 0, published.stderr
    site = margin_cli("site", str(tmp_path / "pub"), "--out", str(tmp_path / "site"))
    assert site.returncode == 0, site.stderr
    page = (tmp_path / "site" / "index.html").read_text("utf-8")
    assert "tfidf-injection" in page and f'<p class="scope">{SCOPE}</p>' in page


def test_new_weights_are_a_new_guard_whose_verdicts_are_recomputed(detector, tmp_path):
    path = guard_file(detector, "tfidf.yaml", FULL)
    first = margin.run(str(path), suite="quick", engine="local", cache=True, out=tmp_path / "a")
    again = margin.run(str(path), suite="quick", engine="local", cache=True, out=tmp_path / "b")
    calls = lambda run: [r for r in map(json.loads, (tmp_path / run / "receipts.jsonl").open()) if r["kind"] == "call"]  # noqa: E731
    assert calls("b") and all(r["cached"] for r in calls("b"))  # same weights: served from the cache

    weights = tmp_path / "site-packages" / "tfidf_injection" / "weights.json"
    before = describe_guard(parse_guard_spec(str(path)))
    weights.write_text(json.dumps({**WEIGHTS, "intercept": 1.5}), encoding="utf-8")  # the upgrade
    after = describe_guard(parse_guard_spec(str(path)))
    assert guard_key(after) != guard_key(before) and dict(after.params)["weights_sha256"] != dict(before.params)[
        "weights_sha256"]
    upgraded = margin.run(str(path), suite="quick", engine="local", cache=True, out=tmp_path / "c")
    assert not any(r["cached"] for r in calls("c"))  # every verdict asked of the new weights
    assert upgraded.report.clean_balanced_accuracy != first.report.clean_balanced_accuracy
    assert first.report == again.report


def test_a_guard_files_id_is_the_published_id_for_every_kind(detector):
    minilm = detector / "m.yaml"
    minilm.write_text("guard: minilm\nid: minilm-strict\nthreshold: 0.6\n", encoding="utf-8")
    assert describe_guard(parse_guard_spec(str(minilm))).id == "minilm-strict"
    keyword = detector / "k.yaml"
    keyword.write_text(f"guard: keyword\nid: my-blocklist\nscope: {SCOPE}\ncaveats: one more\n", encoding="utf-8")
    info = build_guard(parse_guard_spec(str(keyword))).info
    assert info == describe_guard(parse_guard_spec(str(keyword)))  # built and described alike
    assert (info.id, info.scope, info.caveats[-1]) == ("my-blocklist", SCOPE, "one more")
    assert describe_guard(parse_guard_spec(str(keyword), normalize="nfkc")).id == "my-blocklist+nfkc"


def test_a_threshold_tags_the_default_id(detector):
    assert describe_guard(parse_guard_spec("minilm")).id == "minilm"
    assert describe_guard(parse_guard_spec("minilm", threshold=0.5)).id == "minilm"  # the default
    assert describe_guard(parse_guard_spec("minilm", threshold=0.6)).id == "minilm@t0.6"
    assert describe_guard(parse_guard_spec("prompt-guard-2-86m", threshold=0.9)).id == "prompt-guard-2-86m@t0.9"
    path = guard_file(detector, "t.yaml", "weights: package:tfidf_injection\nthreshold: 0.7\n")
    assert describe_guard(parse_guard_spec(str(path))).id == "python:injection_guard.py:InjectionGuard@t0.7"


def test_two_guards_under_one_id_are_refused_with_the_remedy_that_applies(detector, tmp_path):
    for name, threshold in (("a", 0.6), ("b", 0.4)):
        path = guard_file(detector, f"{name}.yaml", f"id: tfidf\nweights: package:tfidf_injection\n"
                                                    f"threshold: {threshold}\n")
        margin.run(str(path), suite="quick", engine="local", out=tmp_path / name)
    refused = margin_cli("publish", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "pub"))
    assert refused.returncode == 2
    assert "two different guards are both named 'tfidf' (threshold differ)" in refused.stderr
    assert "give each its own `id:`" in refused.stderr and "margin score" not in refused.stderr


def test_weights_folders_hash_their_content_not_their_bytecode(tmp_path):
    folder = tmp_path / "w"
    (folder / "__pycache__").mkdir(parents=True)
    (folder / "a.json").write_text("1")
    first = sha256_tree(folder)
    (folder / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert sha256_tree(folder) == first
    (folder / "a.json").write_text("2")
    assert sha256_tree(folder) != first


@pytest.mark.parametrize(("body", "field", "line", "message"), [
    ("weights: nowhere.json\n", "weights", 2, "no such weights file or folder"),
    ("weights: package:no_such_package_here\n", "weights", 2, "no installed package"),
    ("weights: package:tfidf_injection/missing.bin\n", "weights", 2, "no 'missing.bin'"),
    ("scope: x\nbackend: openai\n", "backend", 3, "takes no backend"),
])
def test_bad_declarations_name_the_guard_file_line(detector, body, field, line, message):
    path = guard_file(detector, "bad.yaml", body)
    with pytest.raises(InputError) as caught:
        parse_guard_spec(str(path))
    assert (caught.value.field, caught.value.line) == (field, line) and message in caught.value.message


@pytest.mark.parametrize(("body", "field"), [
    ("backend_options: {max_concurrency: 3}\n", "backend_options"),
    ("options: {x: 1}\n", "options"),
])
def test_options_for_a_guard_without_a_backend_name_the_key_and_its_line(tmp_path, body, field):
    path = tmp_path / "kw.yaml"
    path.write_text("guard: keyword\n" + body)
    with pytest.raises(InputError) as caught:
        parse_guard_spec(str(path))
    assert (caught.value.field, caught.value.line) == (field, 2)
    assert f"takes no {field}" in caught.value.message


def test_weights_for_a_preset_or_keyword_and_a_class_that_cannot_take_them(detector, tmp_path):
    (detector / "w.json").write_text("{}")
    for guard in ("keyword", "llama-guard-4"):
        (detector / "p.yaml").write_text(f"guard: {guard}\nweights: w.json\n")
        with pytest.raises(InputError) as caught:
            parse_guard_spec(str(detector / "p.yaml"))
        assert caught.value.field == "weights"
    (detector / "plain.py").write_text("class G:\n    def classify(self, texts):\n        return ['safe'] * len(texts)\n")
    (detector / "plain.yaml").write_text("guard: python:plain.py:G\nweights: w.json\n")
    proc = margin_cli("run", "--guard", str(detector / "plain.yaml"), "--out", str(tmp_path / "never"))
    assert proc.returncode == 2 and "G() takes no `weights` argument" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "never").exists()


LEXICON = '''
import json


class Lexicon:
    def __init__(self, weights, threshold=0.5):
        self.words = json.loads(weights.read_text("utf-8"))["unsafe"]
        self.threshold = threshold

    def classify(self, texts):
        return ["unsafe" if any(w in t.lower() for w in self.words) else "safe" for t in texts]
'''


def test_on_ray_the_guard_built_on_each_actor_has_the_declared_identity(tmp_path, ray_address):
    (tmp_path / "lexicon.py").write_text(LEXICON, encoding="utf-8")
    (tmp_path / "w.json").write_text('{"unsafe": ["kill", "bomb", "poison"]}', encoding="utf-8")
    (tmp_path / "g.yaml").write_text(f"guard: python:lexicon.py:Lexicon\nid: lex\nweights: w.json\nrevision: '1'\n"
                                     f"threshold: 0.7\nscope: {SCOPE}\n", encoding="utf-8")
    proc = margin_cli("run", "--guard", str(tmp_path / "g.yaml"), "--suite", "quick", "--limit", "6",
                      "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr  # a guard built otherwise on an actor is refused
    entry = json.loads((tmp_path / "run" / "snapshot.json").read_text("utf-8"))["data"][0]
    assert (entry["id"], entry["evaluation"]["scope"], entry["evaluation"]["threshold"]) == ("lex", SCOPE, 0.7)
