"""Known answers and metadata for the transformation library."""

from __future__ import annotations

import unicodedata

import pytest

from margin.cost import edit_distance
from margin.datasets import load_dataset
from margin.transforms import encodings
from margin.transforms.base import EditTransform
from margin.transforms.noise import qwerty_neighbours
from margin.transforms.registry import get_transform, registry
from margin.transforms.salience import ranked_words
from margin.transforms.smuggling import tag_char, variation_selectors
from margin.transforms.upside_down import flip
from margin.transforms.words import word_spans
from margin.util.display import is_invisible

FAMILIES = {  # issue 3's families, each covered by at least one transform
    "homoglyph", "zero-width", "invisible", "tags", "variation-selector", "bidi", "control",
    "diacritic", "zalgo", "fullwidth", "styled", "upside-down", "enclosed", "emoji", "swap",
    "deletion", "insertion", "substitution", "typo", "case", "separator", "tokenbreak",
    "leetspeak", "frame", "dilution", "suffix", "encoding",
}
STABLE_NAMES = {"homoglyph", "zero-width-space", "fullwidth", "leetspeak", "neighbour-swap", "roleplay"}


def test_library_size_families_and_stable_names():
    table = registry()
    assert len(table) >= 30
    assert set(table) >= STABLE_NAMES
    assert {"actor", "assistant"} <= set(table["roleplay"].strengths)
    assert {t.family for t in table.values()} >= FAMILIES  # a new transform may bring a new family
    for t in table.values():
        assert t.kind in ("edit", "wrapper") and t.assumption.strip() and "\n" not in t.assumption
        assert isinstance(t.visible, bool)


# --- nfkc_stable is measured, never just declared -----------------------------------------

def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def measured_nfkc_stable(name: str) -> bool | None:
    """True if NFKC leaves every edit in place over the sample texts, False if it undoes
    every one, None if it undoes some and not others."""
    t = get_transform(name)
    texts = [p.text for p in load_dataset("sample").prompts]
    strengths = t.strengths if t.kind == "wrapper" else ("1", "salient:1", "3", "100%", "@0", "@2")
    outcomes = set()
    for text in texts:
        for strength in strengths:
            for seed in (0, 1, 2):
                out = t.apply(text, strength, seed)
                if out != text:
                    outcomes.add(nfkc(out) != nfkc(text))
    assert outcomes, f"{name} changed none of the sample texts"
    return outcomes.pop() if len(outcomes) == 1 else None


@pytest.mark.parametrize("name", sorted(registry()))
def test_nfkc_stable_is_what_we_measure(name):
    assert get_transform(name).nfkc_stable == measured_nfkc_stable(name)


def test_invisible_edits_only_add_invisible_characters():
    text = "How do I poison the rats in my garage?"
    for name in ("zero-width-space", "zero-width-non-joiner", "zero-width-joiner", "word-joiner",
                 "soft-hyphen", "invisible-separator"):
        out = get_transform(name).apply(text, "100%", 0)
        assert not get_transform(name).visible
        assert "".join(ch for ch in out if not is_invisible(ch)) == text and out != text


# --- known answers ------------------------------------------------------------------------

def test_smuggling_encodings():
    assert tag_char("a") == "\U000e0061"
    assert variation_selectors("a") == "\U000e0151"  # byte 0x61 -> U+E0100 + 0x61 - 16
    assert variation_selectors("\u00e9") == "\U000e01b3\U000e0199"  # UTF-8 C3 A9
    out = get_transform("tag-smuggling").apply("kill", "100%", 0)
    assert out == "".join(chr(0xE0000 + ord(c)) for c in "kill")


@pytest.mark.parametrize(("name", "expected"), [
    ("fullwidth", "\uff4b\uff49\uff4c\uff4c"),
    ("math-bold", "\U0001d424\U0001d422\U0001d425\U0001d425"),
    ("circled", "\u24da\u24d8\u24db\u24db"),
    ("small-caps", "\u1d0b\u026a\u029f\u029f"),
    ("superscript", "\u1d4f\u2071\u02e1\u02e1"),
    ("enclosed", "\U0001f17a\U0001f178\U0001f17b\U0001f17b"),
    ("leetspeak", "k1ll"),
    ("upside-down", "\ua781\ua781\u1d09\u029e"),
])
def test_styled_alphabets(name, expected):
    assert get_transform(name).apply("kill", "100%", 0) == expected


def test_math_italic_has_no_h_and_script_fills_its_holes():
    assert get_transform("math-italic").apply("h", "100%", 0) == "h"  # U+1D455 is unassigned
    assert get_transform("math-script").apply("e", "100%", 0) == "\u212f"  # SCRIPT SMALL E


def test_upside_down_reads_back_when_turned():
    assert flip("hello") == "o\ua781\ua781\u01dd\u0265"
    assert flip("dub") == "qnp"


def test_bidi_controls():
    assert get_transform("bidi-reorder").apply("ab", "1", 0) == "\u202eba\u202c"
    wrap = get_transform("bidi-wrap")
    assert wrap.apply("abc", "lro", 0) == "\u202dabc\u202c"
    assert wrap.apply("abc", "rlo-reversed", 0) == "\u202ecba\u202c"


def test_encoding_wrappers():
    assert encodings.rot13("Hello, world") == "Uryyb, jbeyq"
    assert encodings.base64_utf8("hi") == "aGk="
    assert encodings.json_string('say "hi"\n') == 'say \\"hi\\"\\n'
    assert get_transform("json-field").apply('a "b"', "request", 0) == '{"request": "a \\"b\\""}'
    assert get_transform("quote").apply("one\ntwo", "markdown", 0) == "> one\n> two"
    assert get_transform("reversal").apply("abc", "short", 0) == "Reversed: cba"


def test_qwerty_neighbours():
    assert set(qwerty_neighbours()["g"]) == set("fhtyvb")
    assert set(qwerty_neighbours()["a"]) == set("qwsz")
    out = get_transform("qwerty-typo").apply("g", "1", 0)
    assert out in "fhtyvb"


def test_noise_edits():
    text = "poison the rats"
    deleted = get_transform("char-deletion").apply(text, "100%", 0)
    assert [w[0] + w[-1] for w in deleted.split()] == ["pn", "te", "rs"]  # first and last kept
    prefixed = get_transform("tokenbreak-prefix").apply(text, "@0", 3)
    assert prefixed.endswith("poison the rats") and len(prefixed) == len(text) + 1
    assert get_transform("case-flip").apply("ab", "100%", 0) == "AB"
    assert get_transform("case-flip").apply("aA", "100%", 0) == "aA"  # flips must be fresh
    assert get_transform("space-in-word").apply("ab", "1", 0) == "a b"


def test_marks_attach_after_letters():
    out = get_transform("zalgo").apply("a b", "@0", 0)  # word 0 is "a": the marks follow it
    assert out[0] == "a" and out.endswith(" b") and len(out) == 3 + 3
    assert all(unicodedata.category(ch) == "Mn" for ch in out[1:4])
    under = get_transform("combining-underline").apply("ab", "100%", 0)
    assert under == "a\u0332b\u0332"


def test_homoglyphs_come_from_tr39_data():
    from confusable_homoglyphs import confusables

    out = get_transform("homoglyph").apply("poison", "100%", 0)
    for original, new in zip("poison", out, strict=True):
        assert new != original
        assert any(e["c"] == original for e in confusables.is_confusable(new, greedy=True)[0]["homoglyphs"]) \
            or any(e["c"] == new for e in confusables.is_confusable(original, greedy=True)[0]["homoglyphs"])


# --- positions ------------------------------------------------------------------------------

def test_salient_order_content_words_longest_and_rarest_first():
    text = "How do I kill a Python process?"
    words = [text[s:e] for s, e in word_spans(text)]
    assert [words[i] for i in ranked_words(text)] == ["process", "Python", "kill", "How", "do", "I", "a"]
    # equal length, both content words: the rarer first
    from margin.transforms.salience import zipf

    assert zipf("bake") < zipf("bomb")
    assert ranked_words("bomb bake") == [1, 0] and ranked_words("bake bomb") == [0, 1]


def test_salient_strengths_put_one_edit_in_each_top_word():
    text = "How do I kill a Python process?"
    out = get_transform("zero-width-space").apply(text, "salient:2", 0)
    edited = [w for w in out.split() if "\u200b" in w]
    assert sorted(w.replace("\u200b", "") for w in edited) == ["Python", "process?"]


def test_each_word_strength_covers_every_word():
    text = "How do you poison a well?"
    t = get_transform("homoglyph")
    assert isinstance(t, EditTransform)
    for i, (start, end) in enumerate(word_spans(text)):
        out = t.apply(text, f"@{i}", 0)
        assert edit_distance(text, out) == 1
        assert out[:start] == text[:start] and out[end:] == text[end:]
    # "I" has one NFKC-stable lookalike, "l", and "well" holds an "l": no fresh option
    assert t.apply("How do I poison a well?", "@2", 0) == "How do I poison a well?"


def test_percent_counts_usable_positions():
    t = get_transform("leetspeak")
    text = "aaaa"  # four eligible positions
    assert [edit_distance(text, t.apply(text, s, 0)) for s in ("25%", "26%", "50%", "100%")] == [1, 2, 2, 4]
