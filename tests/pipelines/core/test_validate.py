"""What a FetchEvent must be to touch state: each refusal names its reason."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from frontierflow.pipelines.core.validate import InvalidEvent, Limits, validate_event
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.urls import host_of, http_host

GOOD = FetchEvent(
    url="https://example.org/a",
    fetched_at=1,
    status=200,
    fetcher_id="f",
    host="example.org",
    outlinks=("https://example.org/b",),
)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"url": "ftp://example.org/"}, "url is not an absolute http"),
        ({"url": "https://"}, "url is not an absolute http"),
        ({"url": "https://exa mple.org/"}, "url is not an absolute http"),
        ({"url": "https://example.org:70000/"}, "url is not an absolute http"),
        ({"via": "javascript:void(0)"}, "via is not"),
        ({"fetched_at": -5}, "fetched_at is negative"),
        ({"cycle": -1}, "cycle is negative"),
        ({"bytes": -1}, "bytes is negative"),
        ({"fetch_ms": math.nan}, "fetch_ms is not a finite"),
        ({"fetch_ms": math.inf}, "fetch_ms is not a finite"),
        ({"fetch_ms": -0.5}, "fetch_ms is not a finite"),
        (
            {"outlinks": tuple(f"https://o.example/{i}" for i in range(10**6))},
            "1000000 outlinks exceed the limit of 20000",
        ),
        ({"text": "x" * 10_000_000}, "text of 10000000 characters exceeds"),
        ({"terms": {"a": -1}}, "term frequency is negative"),
    ],
)
def test_refused_with_reason(change: dict, reason: str) -> None:
    with pytest.raises(InvalidEvent, match=reason):
        validate_event(replace(GOOD, **change))


def test_non_http_outlinks_are_dropped_not_refused() -> None:
    event = replace(GOOD, outlinks=("mailto:x@y", "https://ok.example/", "javascript:1", ""))
    assert validate_event(event).outlinks == ("https://ok.example/",)
    assert validate_event(GOOD) is GOOD  # nothing to drop: the same object


def test_limits_are_configurable_and_checked() -> None:
    with pytest.raises(InvalidEvent, match="2 outlinks exceed the limit of 1"):
        validate_event(
            replace(GOOD, outlinks=("https://a.example/", "https://b.example/")),
            Limits(max_outlinks=1),
        )
    with pytest.raises(ValueError, match="max_outlinks must be >= 1"):
        Limits(max_outlinks=0)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://EXAMPLE.org:8080/p?q#f", "example.org"),
        ("https://user:pw@h.example/x", "h.example"),
        ("https://[::1]:8443/", "[::1]"),
        ("https://exämple.de/ü", "exämple.de"),
        ("http://a.b/\x00", None),
        ("https://h:99999/", None),
        ("file:///etc/passwd", None),
    ],
)
def test_http_host(url: str, host: str | None) -> None:
    assert http_host(url) == host
    if host is not None:
        assert host_of(url) == host
