"""margin's data model: small frozen types shared by every part of the system.

Nothing here does I/O or imports another margin module; everything else imports this.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

Label = Literal["safe", "unsafe"]
VerdictLabel = Literal["safe", "unsafe", "invalid"]
TransformKind = Literal["edit", "wrapper"]
ResultStatus = Literal["scored", "missing"]
#: What a model's response does with its request (a judge's classes, and XSTest's labels mapped onto them).
Behaviour = Literal["complies", "refuses", "other"]
Role = Literal["system", "user", "assistant"]
#: Which turn of a case is judged and transformed: the last user turn or the last assistant turn.
Target = Literal["prompt", "response"]

LABELS: tuple[Label, ...] = ("unsafe", "safe")
ROLES: tuple[Role, ...] = ("system", "user", "assistant")
TARGETS: tuple[Target, ...] = ("prompt", "response")
#: The role of the turn each target names.
TARGET_ROLE: dict[Target, Role] = {"prompt": "user", "response": "assistant"}


class Turn(NamedTuple):
    """One message of a conversation."""

    role: Role
    content: str


class Exchange(NamedTuple):
    """Everything a guard that takes whole cases sees for one candidate: the conversation
    ending with the target turn (as transformed), what that turn is, and the case's policy and
    frozen context ("" for none). Hashable: it is the request's key, so two conversations
    that share a target text never share a verdict."""

    messages: tuple[Turn, ...]
    target: Target
    policy: str = ""
    context: str = ""

    @property
    def text(self) -> str:
        """The target turn's text."""
        return self.messages[-1].content


@dataclass(frozen=True, slots=True)
class Prompt:
    """One dataset row (a case). `text` is the target turn's text: what transforms edit and
    costs count. `history` holds the turns before it (none for a plain XSTest prompt),
    `target` says which turn `text` is, `policy` and `context` are the case's policy text and
    frozen evidence ("" for none). `extra` keeps any further columns (tags) as sorted
    (name, value) pairs, and a case with a policy has the `policy` tag naming it (its id, or a
    digest of its text: datasets.cases.policy_name)."""

    id: str
    text: str
    label: Label
    type: str = ""
    focus: str = ""
    note: str = ""
    extra: tuple[tuple[str, str], ...] = ()
    history: tuple[Turn, ...] = ()
    target: Target = "prompt"
    policy: str = ""
    context: str = ""

    @property
    def plain(self) -> bool:
        """A single user prompt with no policy or context: XSTest's shape."""
        return not self.history and self.target == "prompt" and not self.policy and not self.context

    def exchange(self, text: str | None = None) -> Exchange:
        """The case as a guard that takes whole cases sees it, its target turn holding `text`
        (a transformed target; None: the original)."""
        turn = Turn(TARGET_ROLE[self.target], self.text if text is None else text)
        return Exchange((*self.history, turn), self.target, self.policy, self.context)


@dataclass(frozen=True, slots=True)
class TransformInfo:
    """What a transform is, independent of any text it is applied to."""

    name: str
    family: str
    kind: TransformKind
    strengths: tuple[str, ...]
    visible: bool
    nfkc_stable: bool | None
    assumption: str


class Candidate(NamedTuple):
    """One (prompt, transform, strength, seed) with its text and cost.

    The original prompt is the candidate with `transform=None` and cost 0. A named tuple,
    not a dataclass: a run makes hundreds of thousands, and a tuple is made and hashed in C.
    """

    prompt_id: str
    transform: str | None
    strength: str | None
    seed: int
    text: str
    cost: float


class Verdict(NamedTuple):
    """A completed guard output. `invalid` means the output had no classification.
    (A named tuple: guard actors send back thousands a second, and a tuple pickles in C.)"""

    label: VerdictLabel
    p_unsafe: float | None = None
    raw: str = ""
    #: the label the output's own text gave, where the threshold on p_unsafe decided the
    #: other way (a generative guard's reply and its score disagree: counted, never hidden)
    reply: VerdictLabel | None = None

    def is_wrong_for(self, truth: Label) -> bool:
        # `invalid` is never allow or block: it disagrees with every label.
        return self.label != truth


class GuardCall(NamedTuple):
    """One attempt to get a verdict for one candidate. `verdict is None` means no output.
    (A named tuple, like Candidate: one is made for every receipt line.)"""

    candidate: Candidate
    verdict: Verdict | None
    attempt: int
    latency_s: float
    error: str | None = None
    cached: bool = False
    charged: bool = True  # an attempt without output: whether it used up one of the text's attempts
    #: the SHA-256 of the whole case a guard that sees whole cases was asked about (None: the text)
    input_sha256: str | None = None


@dataclass(frozen=True, slots=True)
class Flip:
    """The cheapest candidate whose verdict disagrees with the prompt's label."""

    transform: str
    strength: str
    seed: int
    cost: float
    verdict: VerdictLabel
    text: str


@dataclass(frozen=True, slots=True)
class SearchResult:
    """The outcome of one prompt's search.

    `flip_cost` is c_i of docs/design.md (already capped at the budget); None when `status`
    is `missing` (lost coverage: never scored).
    """

    prompt_id: str
    label: Label
    type: str
    clean_verdict: VerdictLabel | None
    flip_cost: float | None
    capped: bool
    flip: Flip | None
    guard_calls: int
    status: ResultStatus = "scored"
    extra: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Curve:
    """Robust accuracy per class as a right-continuous step function of the budget.

    `ra[label][k]` is the share of that class with c_i > budgets[k], valid on
    [budgets[k], budgets[k+1]).
    """

    budgets: tuple[float, ...]
    ra: dict[str, tuple[float, ...]] = field(default_factory=dict)


#: A MarginReport's headline figures by their snapshot names, in the order snapshots, tables,
#: exports and the site show them (`reports.snapshot_schema.Headline` declares them so).
HEADLINE_FIGURES = ("balanced_margin", "unsafe_margin", "safe_margin", "clean_balanced_accuracy")


@dataclass(frozen=True, slots=True)
class MarginReport:
    """Every headline figure of one run, in docs/design.md's units."""

    budget: float
    unsafe_margin: float | None
    safe_margin: float | None
    balanced_margin: float | None
    clean_balanced_accuracy: float | None
    n: dict[str, int]
    missing: dict[str, int]
    curve: Curve


@dataclass(frozen=True, slots=True)
class GuardInfo:
    """A guard's identity and provenance: what the snapshot's evaluation block records and
    what the verdict cache keys on. `params` holds backend settings that can change verdicts;
    it never holds secrets."""

    id: str
    family: str
    checkpoint: str
    revision: str
    backend: str
    template: str = ""
    template_sha256: str = ""
    threshold: float | None = None
    params: tuple[tuple[str, str], ...] = ()
    caveats: tuple[str, ...] = ()
    # What the guard is for (e.g. "prompt-injection detector, not a harm classifier"): shown
    # with its results so a margin outside that scope is read as such; never in a cache key.
    scope: str = ""
