"""Topic relevance of a fetched page: the keyword-vector cosine of LAFC (Akbari Torkestani 2012,
eqs. 4–5).

A topic is a weighted keyword vector; a page is its term-count vector. Their cosine drives the
learning automata (reward or penalty, path control) and the relevance judge of the evaluation.
One tokeniser serves both the recorded webs and live fetch events, so their terms agree.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

# Letters and digits of any script; everything else (including "_") separates tokens.
_TOKEN = re.compile(r"[^\W_]+")
# "socket:2" or "socket" inside Topic.parse.
_WEIGHTED_KEYWORD = re.compile(r"^([^:\s]+)\s*(?::\s*(\S+))?$")

#: English function words left out of page term vectors. Without them "the", "a", "of" and "to"
#: dominate |v_d| and no page of the Debian manuals reaches even sim 0.5 on any topic.
_STOP_WORDS_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can cannot could did do does doing down during e each eg etc
    few for from further g had has have having he her here hers herself him himself his how i ie
    if in into is it its itself just may me might more most must my myself no nor not now of off
    on once only or other our ours ourselves out over own same shall she should so some such than
    that the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves"""
STOP_WORDS: frozenset[str] = frozenset(_STOP_WORDS_TEXT.split())


def tokenise(text: str) -> list[str]:
    """Lower-cases `text` and splits it on non-alphanumerics (Akbari Torkestani 2012's "lexical
    processing").

    Unicode letters and digits count as alphanumerics, so "Größe" stays one token; "_" and
    punctuation split ("msg_zerocopy" -> "msg", "zerocopy"), which is what a keyword match wants.
    """
    return _TOKEN.findall(text.lower())


def term_counts(text: str, stop_words: frozenset[str] = frozenset()) -> dict[str, int]:
    """Counts the tokens of `text`, leaving out `stop_words`: the f_i of Akbari Torkestani 2012,
    eq. 5."""
    counts = Counter(tokenise(text))
    for word in stop_words & counts.keys():
        del counts[word]
    return dict(counts)


@dataclass(frozen=True)
class Topic:
    """A search topic: the keyword vector v_t of Akbari Torkestani 2012, eq. 4
    (keyword -> weight)."""

    name: str
    weights: dict[str, float]
    norm: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.weights:
            raise ValueError(f"topic {self.name!r} has no keywords")
        for keyword, weight in self.weights.items():
            if tokenise(keyword) != [keyword]:
                # A keyword the tokeniser would split or change can never match a term.
                raise ValueError(
                    f"topic {self.name!r}: keyword {keyword!r} is not one lower-case "
                    "alphanumeric token"
                )
            if not (isinstance(weight, int | float) and math.isfinite(weight) and weight > 0):
                raise ValueError(
                    f"topic {self.name!r}: weight of {keyword!r} must be finite and > 0, "
                    f"got {weight!r}"
                )
        # |v_t| once per topic: similarity() runs once per fetched page.
        object.__setattr__(self, "norm", math.sqrt(sum(w * w for w in self.weights.values())))

    @classmethod
    def parse(cls, text: str, name: str | None = None) -> Topic:
        """Reads "network socket tcp" (every weight 1) or "socket:2,tcp:1".

        Keywords are separated by commas and/or whitespace; a weight follows its keyword after a
        colon. Empty input, a repeated keyword, a bad weight or a keyword that is not a single
        token raise ValueError (a topic is a start-up setting: refuse it there).
        """
        items = [item for item in re.split(r"[,\s]+", text.replace(": ", ":")) if item]
        if not items:
            raise ValueError("empty topic: give keywords like 'socket tcp' or 'socket:2,tcp:1'")
        weights: dict[str, float] = {}
        for item in items:
            match = _WEIGHTED_KEYWORD.match(item)
            if match is None or not match.group(1):
                raise ValueError(f"bad topic item {item!r}: expected 'keyword' or 'keyword:weight'")
            keyword, raw_weight = match.group(1).lower(), match.group(2)
            if keyword in weights:
                raise ValueError(f"keyword {keyword!r} appears twice in topic {text!r}")
            try:
                weight = 1.0 if raw_weight is None else float(raw_weight)
            except ValueError:
                raise ValueError(f"bad weight {raw_weight!r} for keyword {keyword!r}") from None
            weights[keyword] = weight
        return cls(name=name if name is not None else text.strip(), weights=weights)


def similarity(topic: Topic, terms: Mapping[str, int]) -> float:
    """Cosine of the topic vector and the page's term vector (Akbari Torkestani 2012,
    eqs. 4–5).

    Both vectors are m-dimensional, one component per topic keyword (eq. 4 sums over i =
    1..m; "v_d is the m-dimensional term vector of document d"): words that are not keywords
    do not enter the page's norm. tf_i = f_i / max f (eq. 5) only rescales the page vector,
    which a cosine does not see, so the raw counts are used. Consequences: a page that uses
    k of m equally weighted keywords equally scores √(k/m), however long it is, and many
    pages sit exactly on such a value (compare with a tolerance). 0.0 for a page without any
    keyword (the cosine is undefined there).
    """
    dot = 0.0
    squares = 0
    for keyword, weight in topic.weights.items():
        count = terms.get(keyword)
        if count:
            dot += weight * count
            squares += count * count
    if squares == 0:
        return 0.0
    return dot / (topic.norm * math.sqrt(squares))


def keyword_occurrences(topic: Topic, terms: Mapping[str, int]) -> int:
    """How many times the page uses any of the topic's keywords (for `Judge.min_occurrences`)."""
    return sum(terms.get(keyword, 0) for keyword in topic.weights)


@dataclass(frozen=True)
class Judge:
    """Decides whether a page is relevant: sim >= threshold (Akbari Torkestani 2012, §5,
    uses 0.75).

    Many pages score exactly a threshold (a page using k of m keywords equally scores
    sqrt(k/m)), and the float cosine can land a hair below it, hence `tolerance`.
    `min_occurrences` additionally asks for that many keyword occurrences, which keeps
    pages that merely mention a keyword once in a short text out of the relevant set.
    """

    threshold: float = 0.75
    min_occurrences: int = 0
    tolerance: float = 1e-9

    def __post_init__(self) -> None:
        if not (math.isfinite(self.threshold) and 0.0 <= self.threshold <= 1.0):
            raise ValueError(f"threshold must be in [0, 1], got {self.threshold!r}")
        if self.min_occurrences < 0:
            raise ValueError(f"min_occurrences must be >= 0, got {self.min_occurrences!r}")
        if not (math.isfinite(self.tolerance) and 0.0 <= self.tolerance < 0.01):
            raise ValueError(f"tolerance must be in [0, 0.01), got {self.tolerance!r}")

    def relevant(self, topic: Topic, terms: Mapping[str, int]) -> bool:
        """True when the page's similarity reaches the threshold and enough keywords occur."""
        if similarity(topic, terms) < self.threshold - self.tolerance:
            return False
        return keyword_occurrences(topic, terms) >= self.min_occurrences


def url_terms(url: str, stop_words: frozenset[str] = STOP_WORDS) -> dict[str, int]:
    """Term counts of what a URL says about its page: its path and query, tokenised like page
    text (`tokenise`); the scheme and host are left out (a host names a site, not a page).
    "https://h/java/net/Socket.html?x=1" -> {"java": 1, "net": 1, "socket": 1, "html": 1,
    "x": 1, "1": 1}."""
    _, sep, rest = url.partition("://")
    path = rest.partition("/")[2] if sep else url
    return term_counts(path, stop_words)


def event_terms(
    terms: Mapping[str, int] | None,
    text: str | None,
    stop_words: frozenset[str] = STOP_WORDS,
) -> dict[str, int]:
    """The term counts a FetchEvent carries: its `terms` map, else counts of its `text`, else {}.

    A `terms` map that is present wins even when empty (the fetcher extracted nothing). Counts
    must be non-negative integers; anything else raises ValueError, for the caller to turn into
    a dead letter. Zero counts and `stop_words` are dropped from either source, so a page judged
    from a fetcher's map and the same page judged from its text (or from a recorded web, which
    uses the same STOP_WORDS) get the same vector.
    """
    if terms is not None:
        out: dict[str, int] = {}
        for term, count in terms.items():
            if not isinstance(term, str) or isinstance(count, bool) or not isinstance(count, int):
                raise ValueError(f"term counts must map str to int, got {term!r}: {count!r}")
            if count < 0:
                raise ValueError(f"negative count {count} for term {term!r}")
            if count and term not in stop_words:
                out[term] = count
        return out
    if text is not None:
        return term_counts(text, stop_words)
    return {}


#: Five evaluation topics that cut across the four Debian manuals (kernel, Python, PostgreSQL,
#: Java), each m keywords of equal weight as in the paper's topic descriptions. Plural forms are
#: separate keywords because the tokeniser does not stem. Relevant-set sizes under the paper's
#: judge: infra/debian-docs/README.md and docs/RESULTS.md.
TOPICS: dict[str, Topic] = {
    name: Topic.parse(keywords, name=name)
    for name, keywords in {
        "sockets": "socket sockets tcp udp port connection",
        "memory": "memory allocation heap pages allocator page",
        "databases": "sql query table database transaction",
        "concurrency": "thread threads lock locks concurrent synchronization",
        "filesystems": "filesystem filesystems file files inode mount directory directories",
    }.items()
}
