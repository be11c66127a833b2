"""Checks a decoded FetchEvent must pass before it may change any state.

Each rule returns the reason an event is refused; a refused event goes to the dead-letter
output with that reason. Outlinks that are not http(s) — mailto:, javascript:,
fragments of nothing — are dropped from an otherwise good event, since real pages carry
them; only http(s) URLs ever leave the job. Every URL an event names (its page, `via`, its
outlinks) is put in its canonical form here (`state.urls.canonical_url`), once, before any
state sees it: it is the URL's key in state and on every topic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from frontierflow.connectors.base import Failed
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.urls import canonical_http_urls, canonical_url, is_http_url


class InvalidEvent(ValueError):
    """A FetchEvent that decoded but may not be used; the message is the reason."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Sizes beyond which an event is refused rather than processed."""

    max_outlinks: int = 20_000
    max_text_chars: int = 2_000_000
    max_terms: int = 200_000
    max_url_chars: int = 8_192

    def __post_init__(self) -> None:
        for name in ("max_outlinks", "max_text_chars", "max_terms", "max_url_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")


_DEFAULT_LIMITS = Limits()


def validate_event(event: FetchEvent, limits: Limits = _DEFAULT_LIMITS) -> FetchEvent:
    """The event with non-http(s) outlinks dropped and its URLs canonical, or InvalidEvent
    naming the reason."""
    if not is_http_url(event.url, limits.max_url_chars):
        raise InvalidEvent(f"url is not an absolute http(s) URL: {event.url[:200]!r}")
    if event.via is not None and not is_http_url(event.via, limits.max_url_chars):
        raise InvalidEvent(f"via is not an absolute http(s) URL: {event.via[:200]!r}")
    if event.fetched_at < 0:
        raise InvalidEvent(f"fetched_at is negative: {event.fetched_at}")
    if event.cycle < 0:
        raise InvalidEvent(f"cycle is negative: {event.cycle}")
    if event.bytes < 0:
        raise InvalidEvent(f"bytes is negative: {event.bytes}")
    if not math.isfinite(event.fetch_ms) or event.fetch_ms < 0:
        raise InvalidEvent(f"fetch_ms is not a finite non-negative number: {event.fetch_ms}")
    if len(event.outlinks) > limits.max_outlinks:
        raise InvalidEvent(
            f"{len(event.outlinks)} outlinks exceed the limit of {limits.max_outlinks}"
        )
    if event.text is not None and len(event.text) > limits.max_text_chars:
        raise InvalidEvent(
            f"text of {len(event.text)} characters exceeds the limit of {limits.max_text_chars}"
        )
    if event.terms is not None:
        if len(event.terms) > limits.max_terms:
            raise InvalidEvent(f"{len(event.terms)} terms exceed the limit of {limits.max_terms}")
        if any(f < 0 for f in event.terms.values()):
            raise InvalidEvent("a term frequency is negative")
    good = canonical_http_urls(event.outlinks, limits.max_url_chars)
    url = canonical_url(event.url)
    via = None if event.via is None else canonical_url(event.via)
    if good is event.outlinks and url == event.url and via == event.via:
        return event
    return replace(event, url=url, via=via, outlinks=good)


def checked(decoded: FetchEvent | Failed, limits: Limits = _DEFAULT_LIMITS) -> FetchEvent | Failed:
    """What an input item becomes, for every engine: the validated event, or the reason it
    goes to the dead letters (the source's decoding failure, or an `InvalidEvent`)."""
    if isinstance(decoded, Failed):
        return decoded
    try:
        return validate_event(decoded, limits)
    except InvalidEvent as exc:
        return Failed("InvalidEvent", str(exc), b"")
