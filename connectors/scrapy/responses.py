"""What Scrapy's answer to a request came to, as the reference fetcher's `PageOutcome`, so
the FetchEvent is built by the fetcher's own rule (`fetcher.events.outcome_event`).

A response keeps its status; its body is read for links and terms only when it is HTML
(`htmlpages.HTML_TYPES`). Redirects are not followed inside Scrapy (the scheduler sets
`dont_redirect`): a 3xx answer carries its target as the page's only outlink, as the
fetcher does for a redirect to another host, and the frontier decides when it is fetched.
An exception becomes the fetcher's negative status for that kind of failure.
"""

from __future__ import annotations

import time
from urllib.parse import urljoin

from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadTimeoutError,
    IgnoreRequest,
    NotSupported,
    UnsupportedURLSchemeError,
)
from scrapy.http import Response
from twisted.internet import error as twisted_error

from frontierflow.connectors.fetcher.outcomes import (
    BAD_URL,
    DNS_ERROR,
    ROBOTS_DISALLOWED,
    TIMEOUT,
    TOO_LARGE,
    TRANSPORT_ERROR,
    PageOutcome,
)
from frontierflow.connectors.htmlpages import HTML_TYPES
from frontierflow.state.hosts import PAUSE_STATUSES, parse_retry_after

REDIRECTS = frozenset({301, 302, 303, 307, 308})

_DNS = (CannotResolveHostError, twisted_error.DNSLookupError)
_TIMEOUTS = (DownloadTimeoutError, twisted_error.TimeoutError, twisted_error.TCPTimedOutError)
_BAD_URL = (UnsupportedURLSchemeError, NotSupported)


def media_type(response: Response) -> str:
    """The Content-Type's media type, lower case, without parameters ('' when absent)."""
    raw = response.headers.get(b"Content-Type") or b""
    return raw.decode("latin-1").split(";", 1)[0].strip().lower()


def response_outcome(response: Response, latency_s: float) -> PageOutcome:
    """See the module docstring; `latency_s` is Scrapy's `download_latency`."""
    fetch_ms = max(0.0, latency_s * 1000)
    location = response.headers.get(b"Location")
    if response.status in REDIRECTS and location:
        target = urljoin(response.url, location.decode("latin-1").strip())
        return PageOutcome(
            response.status, response.url, fetch_ms=fetch_ms, redirect_to=target, reason="redirect"
        )
    if response.status in PAUSE_STATUSES:
        raw = response.headers.get(b"Retry-After")
        wait = parse_retry_after(
            None if raw is None else raw.decode("latin-1"), int(time.time() * 1000)
        )
        return PageOutcome(
            response.status, response.url, fetch_ms=fetch_ms, retry_after_ms=wait,
            reason="pushed back",
        )  # fmt: skip
    size = len(response.body)
    kind = media_type(response)
    if kind not in HTML_TYPES:
        return PageOutcome(
            response.status,
            response.url,
            size=size,
            fetch_ms=fetch_ms,
            reason=f"content type {kind!r} skipped",
        )
    return PageOutcome(
        response.status, response.url, body=response.body, size=size, fetch_ms=fetch_ms
    )


def exception_status(exc: BaseException) -> int:
    """The fetcher's negative status for a failed request."""
    if isinstance(exc, IgnoreRequest):
        # RobotsTxtMiddleware's refusal; any other middleware's refusal is reported as a
        # transport error with its message (the page was not fetched either way)
        return ROBOTS_DISALLOWED if "robots.txt" in str(exc) else TRANSPORT_ERROR
    if isinstance(exc, _DNS):
        return DNS_ERROR
    if isinstance(exc, _TIMEOUTS):
        return TIMEOUT
    if isinstance(exc, DownloadCancelledError) and "max size" in str(exc):
        return TOO_LARGE
    if isinstance(exc, _BAD_URL):
        return BAD_URL
    return TRANSPORT_ERROR


def exception_outcome(url: str, exc: BaseException, latency_s: float | None) -> PageOutcome:
    """A request that ended in `exc` (connection refused, DNS, time-out, robots.txt…)."""
    return PageOutcome(
        exception_status(exc),
        url,
        fetch_ms=max(0.0, (latency_s or 0.0) * 1000),
        reason=f"{type(exc).__name__}: {exc}",
    )
