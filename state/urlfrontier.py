"""What the URL Frontier service remembers beside the strategy's state, and its encodings.

Per URL of a crawl a `UrlRecord` (queue, status, the strategy's latest priority and echo,
the client's metadata, creation date); per queue its `QueueSettings` (block, delay, crawl
limit); per fetched-page-to-be its `PendingOutlinks` (outlinks that arrived before the
page's own report). Each lives in a column family of the engine's store and is written in
the engine step's transaction, so a kill -9 keeps a step's service records and strategy
state together or neither. Values are compact JSON; bad bytes raise `StateCodecError`.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any, Final

from frontierflow.state.storage.codec import StateCodecError

URLS_FAMILY: Final = "uf.urls"
"""(crawl id, URL) → `UrlRecord`."""
QUEUES_FAMILY: Final = "uf.queues"
"""(crawl id, queue key) → `QueueSettings`; the empty key holds a crawl's defaults."""
PENDING_FAMILY: Final = "uf.pending"
"""(crawl id, parent URL) → `PendingOutlinks`."""
FAMILIES: Final = (URLS_FAMILY, QUEUES_FAMILY, PENDING_FAMILY)

_SEP = "\x00"


def crawl_key(crawl_id: str, name: str) -> bytes:
    """The store key of `name` (a URL or queue key) in `crawl_id`: sorted by crawl, then
    name, so a crawl's keys are one contiguous range."""
    return f"{crawl_id}{_SEP}{name}".encode()


def split_crawl_key(key: bytes) -> tuple[str, str]:
    """(crawl id, name) of a key made by `crawl_key`."""
    crawl_id, sep, name = key.decode().partition(_SEP)
    if not sep:
        raise StateCodecError(f"not a crawl key: {key[:80]!r}")
    return crawl_id, name


class UrlStatus(enum.IntEnum):
    """Where a URL is in the service's life cycle."""

    QUEUED = 0
    """Discovered, not fetched in its cycle yet: served once it has a priority."""
    DONE = 1
    """Fetched, never to be served again (refetchable_from_date 0)."""
    REVISIT = 2
    """Fetched; served again from `refetch_at` on, as cycle `cycle`."""


@dataclass(frozen=True, slots=True)
class UrlRecord:
    """One URL of one crawl as the service keeps it."""

    queue: str
    status: UrlStatus = UrlStatus.QUEUED
    priority: float | None = None
    """The strategy's latest priority (larger = sooner); None: no entry yet."""
    cycle: int = 0
    """The cycle its next fetch belongs to."""
    via: str | None = None
    echo: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, list[str]] = field(default_factory=dict)
    created: int = 0
    """Seconds of UTC epoch time when the service first stored it."""
    refetch_at: int = 0
    """For REVISIT: seconds of UTC epoch time from which it is served again."""
    waiting_for: str | None = None
    """The parent whose report this URL's first priority waits for (see PendingOutlinks)."""
    not_before: int = 0
    """Epoch ms before which it is not handed out: the `not_before` of the frontier's latest
    entry for it (its host paused, a revisit scheduled); 0: none."""

    def servable(self, now_s: float) -> bool:
        """Whether GetURLs may hand it out at `now_s` (locks and queues aside)."""
        if self.priority is None or self.not_before > now_s * 1000:
            return False
        if self.status is UrlStatus.QUEUED:
            return True
        return self.status is UrlStatus.REVISIT and self.refetch_at <= now_s

    def refetchable_from(self) -> int:
        """When a fetched URL may be fetched again, in seconds of UTC epoch time, as
        `refetchable_from_date` says it (0: never): the later of the client's date and the
        frontier's `not_before`, rounded up to a second."""
        if self.status is not UrlStatus.REVISIT:
            return 0
        return max(self.refetch_at, -(-self.not_before // 1000))


def encode_url_record(record: UrlRecord) -> bytes:
    return _dumps(
        {
            "q": record.queue,
            "s": int(record.status),
            "p": record.priority,
            "c": record.cycle,
            "v": record.via,
            "e": record.echo,
            "m": record.metadata,
            "t": record.created,
            "r": record.refetch_at,
            "w": record.waiting_for,
            "n": record.not_before,
        }
    )


def decode_url_record(data: bytes) -> UrlRecord:
    d = _loads(data, "UrlRecord")
    try:
        return UrlRecord(
            queue=str(d["q"]),
            status=UrlStatus(d["s"]),
            priority=None if d["p"] is None else float(d["p"]),
            cycle=int(d["c"]),
            via=d["v"],
            echo={str(k): str(v) for k, v in d["e"].items()},
            metadata={str(k): [str(x) for x in v] for k, v in d["m"].items()},
            created=int(d["t"]),
            refetch_at=int(d["r"]),
            waiting_for=d["w"],
            not_before=int(d.get("n", 0)),  # absent from records written before it
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StateCodecError(f"bad UrlRecord: {exc}") from exc


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """What a client set for a queue (or, under the empty key, for every queue of a crawl)."""

    blocked_until: int = 0
    """Seconds of UTC epoch time; 0: not blocked."""
    delay: int | None = None
    """Seconds between two servings of the queue; None: the crawl's default."""
    crawl_limit: int = 0
    """At most this many URLs of the queue completed; 0: no limit."""


def encode_queue_settings(settings: QueueSettings) -> bytes:
    return _dumps({"b": settings.blocked_until, "d": settings.delay, "l": settings.crawl_limit})


def decode_queue_settings(data: bytes) -> QueueSettings:
    d = _loads(data, "QueueSettings")
    try:
        delay = d["d"]
        return QueueSettings(
            blocked_until=int(d["b"]),
            delay=None if delay is None else int(delay),
            crawl_limit=int(d["l"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise StateCodecError(f"bad QueueSettings: {exc}") from exc


@dataclass(frozen=True, slots=True)
class PendingOutlinks:
    """Outlinks of a page reported (as discovered URLs naming it as their parent) before
    the page itself: they become the outlinks of its FetchEvent when its report arrives,
    or are seeded once `since_ms` is older than the service's outlink time-out."""

    since_ms: int
    outlinks: tuple[str, ...] = ()


def encode_pending(pending: PendingOutlinks) -> bytes:
    return _dumps({"t": pending.since_ms, "o": list(pending.outlinks)})


def decode_pending(data: bytes) -> PendingOutlinks:
    d = _loads(data, "PendingOutlinks")
    try:
        return PendingOutlinks(int(d["t"]), tuple(str(u) for u in d["o"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise StateCodecError(f"bad PendingOutlinks: {exc}") from exc


def _dumps(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _loads(data: bytes, what: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StateCodecError(f"bad {what} bytes: {exc}") from exc
    if not isinstance(value, dict):
        raise StateCodecError(f"bad {what}: not an object")
    return value
