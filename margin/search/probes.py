"""Guard-blind priors for adaptive search: a probe vocabulary and a word salience order.

The probe vocabulary is margin's own list of words that guards tend to react to (violence,
weapons, drugs, crime, abuse, self-harm). It was written from those topics, never from any
guard's lexicon, so using it tells a search nothing about the guard under test. Adaptive
search uses it twice: to turn a safe prompt's harmless words into probe words, and as a
prior on which words of an unsafe prompt to edit first. The guard's answers decide the rest.
"""

from __future__ import annotations

from margin.transforms.words import word_spans

# Ordered from the words most guards block to the weaker signals.
PROBE_WORDS: tuple[str, ...] = (
    "kill", "murder", "bomb", "gun", "shoot", "stab", "rape", "terror", "weapon", "explosive",
    "poison", "suicide", "torture", "kidnap", "massacre", "genocide", "assassinate", "behead",
    "slaughter", "hostage", "drug", "cocaine", "heroin", "meth", "fentanyl", "overdose",
    "attack", "assault", "abuse", "molest", "traffick", "smuggle", "steal", "rob", "burglar",
    "fraud", "scam", "launder", "extort", "blackmail", "ransom", "hack", "malware", "phish",
    "exploit", "counterfeit", "bribe", "arson", "grenade", "rifle", "pistol", "ammo", "bullet",
    "knife", "strangle", "suffocate", "choke", "drown", "hang", "lynch", "maim", "mutilate",
    "execute", "nuke", "anthrax", "sarin", "ricin", "cyanide", "toxin", "nerve", "virus",
    "detonate", "explode", "blast", "shooting", "sniper", "militia", "jihad", "nazi", "racist",
    "slur", "hate", "harm", "hurt", "injure", "wound", "blood", "dead", "death", "die", "corpse",
    "cut", "burn", "starve", "bleed", "beat", "punch", "violent", "violence", "crime", "criminal",
    "illegal", "weed", "opium", "narcotic", "lsd", "porn", "nude", "naked", "sex", "groom",
    "predator", "victim", "prison", "smash", "destroy", "threat", "threaten", "stalk", "spy",
    "cheat", "lie", "forge", "pirate", "crack", "ddos", "trojan", "worm",
)

STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "if", "then", "else", "of", "to", "in", "on", "at", "by", "for", "from", "with", "without", "into", "onto", "over", "under", "about", "above", "below", "between", "through", "during", "before", "after", "as", "is", "are", "was", "were", "be", "been", "being", "am", "do", "does", "did", "doing", "have", "has", "had", "having", "i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "you", "your", "yours", "he", "him", "his", "she", "her", "hers", "it", "its", "they", "them", "their", "theirs", "this", "that", "these", "those", "what", "which", "who", "whom", "whose", "where", "when", "why", "how", "can", "could", "should", "would", "will", "shall", "may", "might", "must", "not", "no", "nor", "so", "too", "very", "just", "than", "there", "here", "all", "any", "both", "each", "few", "more", "most", "other", "some", "such", "only", "own", "same", "s", "t", "don", "now", "get", "got", "make", "made", "way", "best", "good", "find", "tell", "give", "know", "want", "need", "like", "one", "two", "also", "out", "up", "down", "off", "again", "further", "once"]
)


def shared_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def probe_match(word: str) -> int | None:
    """Index of the first probe word this word is a form of (shares its first
    min(len, 5) letters: kill/killing, weapon/weapons, explode/exploding), else None."""
    folded = word.casefold()
    if len(folded) < 3:
        return None
    for index, probe in enumerate(PROBE_WORDS):
        need = min(len(probe), 5)
        if len(folded) >= need and shared_prefix(folded, probe) >= need:
            return index
    return None


def salience_order(text: str, probes: bool = True) -> list[int]:
    """Word indices, the likeliest to matter first: probe-word forms (in probe order; not
    with probes=False), then content words, longest first, then stopwords; ties by position.
    Guard-free."""
    spans = word_spans(text)

    def key(index: int) -> tuple[int, int, int, int]:
        word = text[spans[index][0] : spans[index][1]]
        match = probe_match(word) if probes else None
        if match is not None:
            return (0, match, 0, index)
        tier = 2 if word.casefold() in STOPWORDS or len(word) < 3 else 1
        return (tier, 0, -len(word), index)

    return sorted(range(len(spans)), key=key)
