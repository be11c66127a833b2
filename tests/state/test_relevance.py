"""Akbari Torkestani 2012, eqs. 4–5: tokeniser, topic parsing, cosine similarity and the
relevance judge."""

import math

import pytest

from frontierflow.state.relevance import (
    STOP_WORDS,
    TOPICS,
    Judge,
    Topic,
    event_terms,
    keyword_occurrences,
    similarity,
    term_counts,
    tokenise,
    url_terms,
)


def test_tokenise_lowercases_and_splits_on_non_alphanumerics() -> None:
    # "_", "/", "-" and spaces split; Unicode letters stay inside tokens; upper case folds.
    assert tokenise("Größe_naïve TCP/IP x86-64 ÉCOLE 東京") == [
        "größe",
        "naïve",
        "tcp",
        "ip",
        "x86",
        "64",
        "école",
        "東京",
    ]
    assert tokenise(" -- ") == []


def test_term_counts_with_and_without_stop_words() -> None:
    text = "The socket and the TCP socket"
    assert term_counts(text) == {"the": 2, "socket": 2, "and": 1, "tcp": 1}
    assert term_counts(text, STOP_WORDS) == {"socket": 2, "tcp": 1}


def test_similarity_hand_worked_cosine() -> None:
    topic = Topic("t", {"a": 1.0, "b": 1.0})
    # eq. 4 is over the m = 2 keywords: v_d = (f_a, f_b) = (2, 1), tf = (1, .5); v_t = (1, 1)
    # cos = (1 + .5) / (sqrt(2) * sqrt(1 + .25)) = 1.5 / (1.41421 * 1.11803) = 0.9486833
    assert similarity(topic, {"a": 2, "b": 1, "c": 1}) == pytest.approx(0.9486832980505138)


def test_similarity_uses_topic_weights() -> None:
    topic = Topic("t", {"a": 2.0, "b": 1.0})
    # v_t = (2, 1), tf = (1, 1): cos = 3 / (sqrt 5 * sqrt 2) = 0.9486833
    assert similarity(topic, {"a": 4, "b": 4}) == pytest.approx(0.9486832980505138)


def test_similarity_ignores_words_that_are_not_keywords() -> None:
    topic = Topic("t", {"a": 1.0, "b": 1.0})
    # v_d is m-dimensional (eq. 4): x, y, z do not count; (1, 0)·(1, 1) / (1 * sqrt 2) = 0.7071
    assert similarity(topic, {"a": 1, "x": 1, "y": 1, "z": 1}) == pytest.approx(0.7071067811865476)
    assert similarity(topic, {"a": 1, "x": 1000}) == similarity(topic, {"a": 1})


def test_similarity_is_blind_to_the_max_f_scaling() -> None:
    topic = Topic("t", {"a": 1.0, "b": 3.0})
    doc = {"a": 5, "b": 2, "c": 9}
    # eq. 5 divides by max f; a cosine ignores any scale, so 7x the counts scores the same.
    scaled = {term: 7 * f for term, f in doc.items()}
    assert similarity(topic, scaled) == pytest.approx(similarity(topic, doc), abs=1e-15)
    # by hand, over the keywords a, b: (1*5 + 3*2) / (sqrt(10) * sqrt(25 + 4)) = 11 / 17.0294
    # = 0.6459422
    assert similarity(topic, doc) == pytest.approx(0.6459422414661737)


@pytest.mark.parametrize(
    ("k", "expected"),
    # sqrt(k/4): 1 -> 0.5, 2 -> 0.7071, 3 -> 0.8660, 4 -> 1
    [(1, 0.5), (2, 0.7071067811865476), (3, 0.8660254037844386), (4, 1.0)],
)
def test_page_using_k_of_m_keywords_equally_scores_sqrt_k_over_m(k: int, expected: float) -> None:
    topic = Topic.parse("w x y z")
    doc = {kw: 3 for kw in ["w", "x", "y", "z"][:k]}
    # dot = 3k, |v_t| = 2, |v_d| = 3 sqrt(k): cos = 3k / (6 sqrt k) = sqrt(k) / 2 = sqrt(k/4)
    assert similarity(topic, doc) == pytest.approx(expected)


def test_similarity_of_empty_or_unrelated_page_is_zero() -> None:
    topic = Topic.parse("socket tcp")
    assert similarity(topic, {}) == 0.0
    assert similarity(topic, {"memory": 4}) == 0.0


def test_judge_threshold_with_tolerance() -> None:
    topic = Topic.parse("w x y z")
    page = {"w": 3}  # sqrt(1/4) = 0.5 exactly
    assert Judge(threshold=0.5, tolerance=0.0).relevant(topic, page)
    # 0.5 is 1e-12 short of this threshold: inside the default tolerance 1e-9, so relevant ...
    assert Judge(threshold=0.5 + 1e-12).relevant(topic, page)
    # ... but not without tolerance, nor 1e-6 short.
    assert not Judge(threshold=0.5 + 1e-12, tolerance=0.0).relevant(topic, page)
    assert not Judge(threshold=0.5 + 1e-6).relevant(topic, page)
    # The paper's default 0.75: 0.5 is far below; 3 of 4 keywords (0.866) pass.
    assert not Judge().relevant(topic, page)
    assert Judge().relevant(topic, {"w": 3, "x": 3, "y": 3})


def test_judge_min_occurrences() -> None:
    topic = Topic.parse("w x")
    page = {"w": 2, "x": 2}  # sim 1.0, 4 keyword occurrences
    assert keyword_occurrences(topic, page) == 4
    assert Judge(threshold=0.5, min_occurrences=4).relevant(topic, page)
    assert not Judge(threshold=0.5, min_occurrences=5).relevant(topic, page)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": 1.5},
        {"threshold": -0.1},
        {"threshold": math.nan},
        {"min_occurrences": -1},
        {"tolerance": -1e-9},
        {"tolerance": 0.5},
    ],
)
def test_judge_refuses_bad_settings(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Judge(**kwargs)  # type: ignore[arg-type]


def test_topic_parse_plain_and_weighted() -> None:
    assert Topic.parse("network socket tcp").weights == {"network": 1.0, "socket": 1.0, "tcp": 1.0}
    assert Topic.parse("socket:2,tcp:1").weights == {"socket": 2.0, "tcp": 1.0}
    # Mixed separators, spaces after the colon, upper case folded.
    parsed = Topic.parse(" Socket: 2.5 ,TCP  udp:0.5 ", name="net")
    assert parsed.name == "net"
    assert parsed.weights == {"socket": 2.5, "tcp": 1.0, "udp": 0.5}
    # |v_t| is precomputed: sqrt(2.5² + 1 + 0.5²) = sqrt(7.5) = 2.7386128
    assert parsed.norm == pytest.approx(2.7386127875258306)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty topic"),
        (" , ,", "empty topic"),
        ("socket:abc", "bad weight"),
        ("socket:1:2", "bad weight"),
        ("socket:-1", "must be finite and > 0"),
        ("socket:0", "must be finite and > 0"),
        ("socket:nan", "must be finite and > 0"),
        ("socket:inf", "must be finite and > 0"),
        ("socket tcp Socket", "appears twice"),
        ("tcp/ip", "not one lower-case alphanumeric token"),
        ("msg_zerocopy", "not one lower-case alphanumeric token"),
        (":2", "bad topic item"),
    ],
)
def test_topic_parse_refuses_bad_input(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Topic.parse(text)


def test_topic_refuses_empty_weights() -> None:
    with pytest.raises(ValueError, match="no keywords"):
        Topic("t", {})


def test_event_terms_prefers_the_terms_map() -> None:
    # The map wins over the text; stop words and zero counts are dropped.
    assert event_terms({"socket": 3, "the": 9, "tcp": 0}, "memory memory") == {"socket": 3}
    # A present but empty map means "extracted, nothing there": the text is not used.
    assert event_terms({}, "memory") == {}
    assert event_terms(None, "The memory, the MEMORY") == {"memory": 2}
    assert event_terms(None, None) == {}


@pytest.mark.parametrize("terms", [{"socket": -1}, {"socket": 1.5}, {"socket": True}, {3: 1}])
def test_event_terms_refuses_bad_counts(terms: dict[object, object]) -> None:
    with pytest.raises(ValueError):
        event_terms(terms, None)  # type: ignore[arg-type]


def test_named_topics() -> None:
    assert len(TOPICS) == 5
    for name, topic in TOPICS.items():
        assert topic.name == name
        assert 4 <= len(topic.weights) <= 8
        assert not set(topic.weights) & STOP_WORDS
    assert set(topic.weights.values()) == {1.0}  # the paper's topics: m keywords, equal weight


def test_url_terms_count_the_path_and_query_not_the_scheme_or_host() -> None:
    url = "https://sockets.example.invalid/java/net/Socket.html?x=1&the=socket"
    assert url_terms(url) == {"java": 1, "net": 1, "socket": 2, "html": 1, "x": 1, "1": 1}
    assert url_terms("https://h.invalid") == {}
    assert url_terms("plain/Tcp") == {"plain": 1, "tcp": 1}  # no scheme: all of it
