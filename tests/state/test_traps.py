"""Links not worth following and registered domains (state/traps.py)."""

from __future__ import annotations

import pytest

from frontierflow.state.traps import (
    LinkLimits,
    followable_links,
    link_problem,
    pattern_depth,
    registered_domain,
    url_netloc,
    url_pattern,
)


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://a.test/", False),
        ("http://a.test/2024/01/01/story.html", False),  # "01" twice in a row: allowed
        ("http://a.test/x/x/x", True),  # three in a row
        ("http://a.test/a/b/a/b/a/b/c", True),  # a two-segment run three times
        ("http://a.test/a/b/c/a/b/c/a/b/c", True),  # a three-segment run three times
        ("http://a.test/a/b/a/b/c", False),  # twice only
        ("http://a.test/" + "/".join(f"s{i}" for i in range(16)), False),  # 16 segments
        ("http://a.test/" + "/".join(f"s{i}" for i in range(17)), True),  # 17
        ("http://a.test/?q=" + "x" * 2_100, True),  # over 2048 characters
        ("http://a.test/day/1", False),
        ("http://a.test/p?next=/x/x/x", False),  # the query is not the path
    ],
)
def test_link_problem(url: str, refused: bool) -> None:
    assert (link_problem(url) is not None) is refused
    # the screen of many links agrees with the check of each
    links = ("http://b.test/ok", url, "http://c.test/fine/page")
    kept = followable_links(links)
    assert (url not in kept) is refused
    assert "http://b.test/ok" in kept and "http://c.test/fine/page" in kept


def test_followable_links_keeps_the_tuple_when_all_pass() -> None:
    links = tuple(f"http://h{i}.test/a/{i}/p.html" for i in range(30))
    assert followable_links(links) is links


def test_limits_can_be_turned_off() -> None:
    off = LinkLimits(max_url_chars=0, max_path_segments=0, max_segment_repeats=0)
    assert link_problem("http://a.test/x/x/x/x", off) is None
    with pytest.raises(ValueError, match="max_path_segments"):
        LinkLimits(max_path_segments=-1)


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.example.co.uk", "example.co.uk"),
        ("a.b.example.com", "example.com"),
        ("Example.COM:8080", "example.com"),
        ("127.0.0.1", "127.0.0.1"),
        ("localhost", "localhost"),
        ("good.test", "good.test"),
    ],
)
def test_registered_domain(host: str, domain: str) -> None:
    assert registered_domain(host) == domain


def test_pattern_depth_counts_links_between_urls_of_one_pattern() -> None:
    assert url_pattern("http://Cal.test/Day/17") == url_pattern("http://cal.test/day/3")
    assert url_pattern("http://a.test/s/1/") != url_pattern("http://a.test/s/1/a2.html")
    assert pattern_depth("http://a.test/day/1", None, 0) == 0  # a start page
    assert pattern_depth("http://a.test/day/1", "http://a.test/", 5) == 0  # another pattern
    assert pattern_depth("http://a.test/day/9", "http://a.test/day/8", 4) == 5
    assert pattern_depth("http://a.test/day/9", "http://b.test/day/8", 4) == 0  # another host
    assert pattern_depth("http://a.test/lib/ssl.html", "http://a.test/lib/socket.html", 3) == 0
    assert url_netloc("http://a.test:8080/x") == "a.test:8080"


def test_a_page_at_the_limit_keeps_only_its_links_of_other_patterns() -> None:
    page = "http://a.test/day/31"
    links = (
        "http://a.test/day/32",
        "http://b.test/day/32",
        "http://a.test/",
        "http://a.test/day/33",
    )
    limits = LinkLimits(max_pattern_depth=10)
    assert followable_links(links, limits, page, depth=9) is links  # 9 < 10: all
    kept = ("http://b.test/day/32", "http://a.test/")
    assert followable_links(links, limits, page, depth=10) == kept
    assert followable_links(links, limits, None, depth=99) is links  # no page: no depth
    off = LinkLimits(max_pattern_depth=0)
    assert followable_links(links, off, page, depth=1_000) is links
    with pytest.raises(ValueError, match="max_pattern_depth"):
        LinkLimits(max_pattern_depth=-1)
