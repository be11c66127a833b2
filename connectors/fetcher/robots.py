"""robots.txt per host (RFC 9309, read with protego): may a URL be fetched, and how long
to wait between requests (Crawl-delay).

A 4xx answer allows everything; 5xx or a transport failure disallows everything for a
while (the RFC's "unreachable"), after which the file is asked for again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from protego import Protego

log = logging.getLogger(__name__)

RULES_TTL_S = 24 * 3600.0
UNREACHABLE_TTL_S = 60.0


@dataclass(frozen=True, slots=True)
class HostRules:
    """A host's robots.txt as the fetcher applies it."""

    parser: Protego | None
    """None: no rules (everything allowed), unless `unreachable`."""
    unreachable: bool = False
    fetched_at: float = 0.0

    def allows(self, url: str, user_agent: str) -> bool:
        if self.unreachable:
            return False
        return True if self.parser is None else bool(self.parser.can_fetch(url, user_agent))

    def crawl_delay(self, user_agent: str) -> float | None:
        if self.parser is None:
            return None
        delay = self.parser.crawl_delay(user_agent)
        return None if delay is None else float(delay)

    def expired(self, now: float) -> bool:
        ttl = UNREACHABLE_TTL_S if self.unreachable else RULES_TTL_S
        return now - self.fetched_at > ttl


def rules_from_answer(status: int, body: bytes | None, now: float | None = None) -> HostRules:
    """The rules a robots.txt answer gives (status < 0: the request failed)."""
    now = time.monotonic() if now is None else now
    if 200 <= status < 300 and body is not None:
        return HostRules(Protego.parse(body.decode("utf-8", errors="replace")), fetched_at=now)
    if 400 <= status < 500:
        return HostRules(None, fetched_at=now)
    return HostRules(None, unreachable=True, fetched_at=now)
