"""The case schema beyond XSTest's: a conversation, which of its turns is judged, a policy and
frozen context (docs/datasets.md#cases-beyond-one-prompt).

Pure: a row's fields in, the case's parts out, or one InputError naming the file, the line and
the field. The target turn is always the conversation's last: a `prompt` case ends with a user
turn, a `response` case with an assistant turn; what comes before it goes to a guard unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from margin.errors import InputError
from margin.types import ROLES, TARGET_ROLE, TARGETS, Candidate, Exchange, Prompt, Target, Turn
from margin.util.hashing import canonical_json, sha256_bytes, sha256_text
from margin.util.yamlfile import parse_yaml

#: The columns of the case schema; none of them is a slice tag.
CASE_COLUMNS = ("messages", "target", "policy", "context")
#: The tag a case with a policy carries, naming it (`policy_name`): results, slices and exports
#: read the policy axis from it; a case without a policy carries none, so XSTest's stay as they are.
POLICY_TAG = "policy"


@dataclass(frozen=True, slots=True)
class CaseParts:
    """A row's case: the target turn's text, the turns before it, and the rest."""

    text: str
    history: tuple[Turn, ...]
    target: Target
    policy: str
    context: str
    policy_name: str = ""  # what slices and exports call the policy ("" for none): `policy_name`


@dataclass(frozen=True, slots=True)
class Policies:
    """A `--policies` file: policy texts by id, and the file's identity (it decides verdicts)."""

    name: str
    source: str
    sha256: str
    texts: Mapping[str, str]


def read_policies(path: str | Path) -> Policies:
    """A YAML mapping of policy ids to non-empty policy texts; errors name the file and line."""
    file = Path(path)
    if not file.is_file():
        raise InputError("no such policies file", path=path, field="--policies")
    data = file.read_bytes()
    loaded, node = parse_yaml(data, file)
    if not isinstance(loaded, dict) or not loaded:
        raise InputError("expected a mapping of policy ids to policy texts", path=file, line=1, field="--policies")
    lines = {str(k.value): k.start_mark.line + 1 for k, _ in node.value} if node is not None else {}
    for key, text in loaded.items():
        if not isinstance(key, str) or not isinstance(text, str) or not text.strip():
            raise InputError(f"policy {key!r} needs a non-empty text", path=file, line=lines.get(str(key)),
                             field=str(key))
    return Policies(file.name, str(file), sha256_bytes(data), dict(loaded))


def policy_name(cell: str, policies: Policies | None) -> str:
    """The name a case's policy goes by in slices and exports: its id in the `--policies` file,
    or, for a policy text written in the case, `sha256:` and the first 12 hex digits of the
    text's SHA-256 (short, stable, and the same for the same text in any file)."""
    if not cell:
        return ""
    return cell if policies is not None else f"sha256:{sha256_text(cell)[:12]}"


def _a(role: str) -> str:
    return f"an {role}" if role == "assistant" else f"a {role}"  # a user, a system, an assistant


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(ch) <= 0xDFFF for ch in text)


def parse_messages(value: object, path: str | Path, line: int) -> tuple[Turn, ...]:
    """A `messages` value (a JSON list, or its JSON text as a CSV cell holds it) as turns:
    objects with exactly `role` and `content`, roles system / user / assistant, at most one
    system turn and only first, then user and assistant turns alternating from a user turn."""

    def bad(message: str) -> InputError:
        return InputError(message, path=path, line=line, field="messages")

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise bad(f"not valid JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, list) or not value:
        raise bad("expected a non-empty JSON list of {\"role\": ..., \"content\": ...} objects")
    turns: list[Turn] = []
    for number, item in enumerate(value, start=1):
        if not isinstance(item, Mapping):
            raise bad(f"turn {number} is not an object")
        keys = set(item)
        if keys != {"role", "content"}:
            what = sorted(keys - {"role", "content"}) or sorted({"role", "content"} - keys)
            kind = "unknown key(s)" if keys - {"role", "content"} else "missing key(s)"
            raise bad(f"turn {number} has {kind} {', '.join(map(str, what))}; a turn has exactly role and content")
        role, content = item["role"], item["content"]
        if role not in ROLES:
            raise bad(f"turn {number} has unknown role {role!r}; expected system, user or assistant")
        if not isinstance(content, str) or not content.strip():
            raise bad(f"turn {number} ({role}) needs non-empty text as its content")
        if _has_surrogate(content):
            raise bad(f"turn {number} ({role}) contains a lone surrogate")
        turns.append(Turn(role, content))
    start = 1 if turns[0].role == "system" else 0
    for number, turn in enumerate(turns[start:], start=start + 1):
        expected = "user" if (number - start) % 2 == 1 else "assistant"
        if turn.role != expected:
            where = "a system turn only first" if turn.role == "system" else f"{_a(expected)} turn here"
            raise bad(f"turn {number} is {_a(turn.role)} turn; expected {where} "
                      "(an optional system turn, then user and assistant turns alternating from a user turn)")
    if start == len(turns):
        raise bad("only a system turn; a conversation needs a user turn")
    return tuple(turns)


def _text(row: Mapping[str, object], name: str, path: str | Path, line: int) -> str:
    value = row.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(f"expected text, not {type(value).__name__}", path=path, line=line, field=name)
    if _has_surrogate(value):
        raise InputError("contains a lone surrogate", path=path, line=line, field=name)
    return value


def case_parts(row: Mapping[str, object], prompt: str, run_target: Target, path: str | Path,
               line: int, policies: Policies | None = None) -> CaseParts:
    """The case a row holds. `prompt` is its `prompt` cell as text ("" for none); `run_target`
    is the run's target (`--target`), which a row's own `target` cell must match: a run's costs
    are on one scale, its target texts'. With `policies`, a `policy` cell is an id in them."""
    own = _text(row, "target", path, line)
    if own and own not in TARGETS:
        raise InputError(f"unknown target {own!r}; expected prompt or response", path=path, line=line, field="target")
    if own and own != run_target:
        raise InputError(f"this case's target is {own} but the run's is {run_target}: a run judges one target "
                         f"(pass --target {own}, or split the file)", path=path, line=line, field="target")
    target = run_target
    history: tuple[Turn, ...] = ()
    messages = row.get("messages")
    if messages is None or messages == "":
        if target != "prompt":
            raise InputError(f"a {target} target needs {_a(TARGET_ROLE[target])} turn: give the conversation as "
                             "`messages`", path=path, line=line, field="target")
        text = prompt
    else:
        if prompt:
            raise InputError("give the text as `prompt` or as the last turn of `messages`, not both",
                             path=path, line=line, field="prompt")
        turns = parse_messages(messages, path, line)
        role = TARGET_ROLE[target]
        if turns[-1].role != role:
            has = any(t.role == role for t in turns)
            ends = f"ends with {_a(turns[-1].role)} turn" if has else f"has no {role} turn"
            raise InputError(f"a {target} target is the conversation's last turn, {_a(role)} turn; this conversation "
                             f"{ends}",
                             path=path, line=line, field="messages")
        text, history = turns[-1].content, turns[:-1]
    policy = cell = _text(row, "policy", path, line)
    if policy and policies is not None:
        if policy not in policies.texts:
            raise InputError(f"unknown policy id {policy!r}; {policies.source} has {', '.join(sorted(policies.texts))}",
                             path=path, line=line, field="policy")
        policy = policies.texts[policy]
    return CaseParts(text, history, target, policy, _text(row, "context", path, line), policy_name(cell, policies))


#: What a guard request is keyed by: a text, or a whole case (`Exchange`).
RequestKey = str | Exchange


def case_json(exchange: Exchange) -> str:
    """A whole case as canonical JSON: what the verdict cache and the receipts key it by (every
    part a guard sees, so two conversations that end in the same text never share a key)."""
    return canonical_json({"messages": [[t.role, t.content] for t in exchange.messages], "target": exchange.target,
                           "policy": exchange.policy, "context": exchange.context})


def key_sha256(key: RequestKey) -> str:
    """A request key's SHA-256: a text's own (as receipts have always recorded it), a case's JSON's."""
    return sha256_text(key) if isinstance(key, str) else sha256_text(case_json(key))


def guard_request(case: Prompt, candidate: Candidate, whole_cases: bool) -> tuple[RequestKey, str | Exchange]:
    """(key, request) for one candidate: what decides its verdict, and what the guard is sent.
    A guard that sees the target text alone is sent the text, keyed by it; one that sees whole
    cases is sent the case with the candidate as its target turn, keyed by the text when the
    case is a plain prompt (the text is then all there is) and by the whole case otherwise."""
    if not whole_cases:
        return candidate.text, candidate.text
    exchange = case.exchange(candidate.text)
    return (candidate.text if case.plain else exchange), exchange
