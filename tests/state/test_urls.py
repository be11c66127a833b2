"""URL checks on the hot path: the one-match check of a page's outlinks answers exactly as
the per-URL check does."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontierflow.state.urls import (
    canonical_http_urls,
    canonical_url,
    host_of,
    http_host,
    http_urls,
    is_http_url,
)

PIECES = st.sampled_from(
    [
        "http://",
        "https://",
        "HTTP://",
        "ftp://",
        "mailto:",
        "a",
        "b.org",
        "/",
        "?q=1",
        "#f",
        ":",
        ":80",
        ":65535",
        ":65536",
        ":99999",
        ":08080",
        "@",
        "user@",
        "[::1]",
        "A.Example",
        ":443",
        ":0443",
        "HTTPS://",
        "[",
        "]",
        " ",
        "\n",
        "\t",
        "\x00",
        "\x1b",
        "\x1c",
        "\x0b",
        "\r",
        "\x7f",
        "\x85",
        "\xa0",
        "é",
        "٣",
        "x" * 40,
        "",
    ]
)
URLS = st.lists(st.lists(PIECES, max_size=6).map("".join), max_size=8).map(tuple)


@given(URLS)
def test_http_urls_keeps_exactly_what_the_per_url_check_keeps(urls: tuple[str, ...]) -> None:
    assert http_urls(urls) == tuple(u for u in urls if is_http_url(u))


@given(URLS, st.integers(min_value=1, max_value=60))
def test_http_urls_honours_the_length_limit(urls: tuple[str, ...], limit: int) -> None:
    assert http_urls(urls, limit) == tuple(u for u in urls if is_http_url(u, limit))


def test_every_ascii_character_in_every_part_of_a_url() -> None:
    """The one-match path for ASCII text (whose match also refuses the controls) against
    the per-URL check, for each of the 128 ASCII characters in each part of a URL."""
    templates = (
        "http{}s://a.org/",
        "https://u{}@a.org/",
        "https://a{}.org/",
        "https://a.org:8{}/",
        "https://a.org/p{}q",
        "https://a.org/?q{}",
        "https://[::{}1]/",
    )
    for template in templates:
        for code in range(128):
            url = template.format(chr(code))
            urls = ("https://b.org/", url, "http://c.org:80/#f")
            assert http_urls(urls) == tuple(u for u in urls if is_http_url(u)), repr(url)


def test_a_page_whose_outlinks_all_pass_is_returned_as_it_is() -> None:
    urls = ("https://a.org/x", "http://b.org:8080/?q", "HTTPS://[::1]:1/#f")
    assert http_urls(urls) is urls


def test_the_port_limit_and_a_newline_inside_a_url() -> None:
    # A 5-digit port leaves the one-match path; 65535 is the last port allowed.
    assert http_urls(("http://a.org:65535/", "http://a.org:65536/")) == ("http://a.org:65535/",)
    # Two good URLs glued by a newline are one bad URL, not two good ones.
    assert http_urls(("http://a.org/\nhttp://b.org/",)) == ()


def test_hosts() -> None:
    assert http_host("https://User@Example.ORG:8080/p") == "example.org"
    assert host_of("https://User@Example.ORG:8080/p") == "example.org"
    assert host_of("http://[::1]:80/") == "[::1]"
    assert host_of("https://Example.ORG/a/b") == "example.org"
    assert host_of("https://a.org") == "a.org"
    # a query or fragment right after the host is no part of it
    assert host_of("https://a.org?q=1") == "a.org"
    assert host_of("https://A.org#top") == "a.org"
    assert host_of("http://u:p@a.org:8080?x") == "a.org"
    assert http_host("http://a.org:65536/") is None


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://example.com/a", "http://example.com/a"),
        ("HTTP://Example.COM", "http://example.com/"),
        ("http://a.com:80/x#part", "http://a.com/x"),
        ("https://a.com:443?q=1", "https://a.com/?q=1"),
        ("http://a.com:443/", "http://a.com:443/"),  # not http's default port
        ("http://u:P@A.com:0080/", "http://u:P@a.com/"),
        ("http://a.com:/x", "http://a.com/x"),
        ("https://a.com:0444/X#", "https://a.com:444/X"),
        ("http://[::1]:8080/a", "http://[::1]:8080/a"),
        ("http://a.com/%7Ex/Y?b=1&a=2#x#y", "http://a.com/%7Ex/Y?b=1&a=2"),
        ("http://a.com#top", "http://a.com/"),
    ],
)
def test_canonical_form(url: str, canonical: str) -> None:
    assert canonical_url(url) == canonical


@given(URLS)
def test_canonical_urls_are_the_good_urls_each_canonical(urls: tuple[str, ...]) -> None:
    canonical = canonical_http_urls(urls)
    assert canonical == tuple(canonical_url(u) for u in urls if is_http_url(u))
    for url in canonical:
        assert is_http_url(url)
        assert canonical_url(url) == url
        assert host_of(url) == http_host(url)


def test_outlinks_already_canonical_are_returned_as_they_are() -> None:
    urls = ("http://a.com/x", "https://b.org/y?q=1", "http://c.net/")
    assert canonical_http_urls(urls) is urls
    assert canonical_http_urls(()) == ()
