"""What one request came to, whatever client made it: the negative FetchEvent statuses for
transport problems and the `PageOutcome` record. The reference fetcher's HTTP client
(`http.py`) and the Scrapy adapter (`connectors/scrapy`) both describe a download this way,
so both publish the same FetchEvent for the same answer (`events.outcome_event`).
"""

from __future__ import annotations

from dataclasses import dataclass

TRANSPORT_ERROR = -1
"""Connection refused or reset, a broken response."""
TIMEOUT = -2
DNS_ERROR = -3
BLOCKED_ADDRESS = -4
"""The host resolves only to loopback, private or other non-global addresses."""
TOO_MANY_REDIRECTS = -5
TOO_LARGE = -6
ROBOTS_DISALLOWED = -7
BAD_URL = -8
"""Not an absolute http(s) URL (also a redirect to one)."""

HOST_PROBLEMS = frozenset({DNS_ERROR, BLOCKED_ADDRESS, BAD_URL})
"""Outcomes about the host, not the page: a robots.txt request that meets one reports it
for the page instead of pausing the host."""

STATUS_REASONS = {
    TRANSPORT_ERROR: "transport-error",
    TIMEOUT: "timeout",
    DNS_ERROR: "dns-error",
    BLOCKED_ADDRESS: "blocked-address",
    TOO_MANY_REDIRECTS: "too-many-redirects",
    TOO_LARGE: "too-large",
    ROBOTS_DISALLOWED: "robots-disallowed",
    BAD_URL: "bad-url",
}


@dataclass(frozen=True, slots=True)
class PageOutcome:
    """What one request (with its same-host redirects) came to."""

    status: int
    final_url: str
    body: bytes | None = None
    """The HTML body; None for errors, non-HTML types and redirects."""
    size: int = 0
    """Bytes of body read."""
    fetch_ms: float = 0.0
    reason: str = ""
    """For a negative status or a skipped body: why, for the log."""
    redirect_to: str | None = None
    """A redirect to another host: where it pointed."""
    retry_after_ms: int | None = None
    """The answer's `Retry-After`, parsed (`state.hosts.parse_retry_after`)."""
