"""Typed Python views of the wire records.

Each dataclass mirrors one Avro schema in this folder field for field; `to_avro` gives the
dict fastavro writes and `from_avro` takes the dict fastavro reads. Operators work on these
types, never on raw dicts, so a misspelt field is a type error and not a silent None.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any


@dataclass(frozen=True, slots=True)
class FetchEvent:
    """One fetched page, as a fetcher reports it (schema `FetchEvent`)."""

    url: str
    fetched_at: int
    status: int
    fetcher_id: str
    host: str
    via: str | None = None
    crawl_id: str = "default"
    cycle: int = 0
    outlinks: tuple[str, ...] = ()
    terms: dict[str, int] | None = None
    text: str | None = None
    content_hash: str | None = None
    published_at: int | None = None
    bytes: int = 0
    fetch_ms: float = 0.0
    echo: dict[str, str] = field(default_factory=dict)
    retry_after_ms: int | None = None
    crawl_delay_ms: int | None = None
    failure: str | None = None
    will_retry: bool = False
    depth: int | None = None

    def to_avro(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "fetched_at": self.fetched_at,
            "status": self.status,
            "fetcher_id": self.fetcher_id,
            "host": self.host,
            "via": self.via,
            "crawl_id": self.crawl_id,
            "cycle": self.cycle,
            "outlinks": list(self.outlinks),
            "terms": self.terms,
            "text": self.text,
            "content_hash": self.content_hash,
            "published_at": self.published_at,
            "bytes": self.bytes,
            "fetch_ms": self.fetch_ms,
            "echo": self.echo,
            "retry_after_ms": self.retry_after_ms,
            "crawl_delay_ms": self.crawl_delay_ms,
            "failure": self.failure,
            "will_retry": self.will_retry,
            "depth": self.depth,
        }

    @classmethod
    def from_avro(cls, d: dict[str, Any]) -> FetchEvent:
        return cls(
            url=d["url"],
            fetched_at=_millis(d["fetched_at"]),
            status=d["status"],
            fetcher_id=d["fetcher_id"],
            host=d["host"],
            via=d.get("via"),
            crawl_id=d.get("crawl_id", "default"),
            cycle=d.get("cycle", 0),
            outlinks=tuple(d.get("outlinks") or ()),
            terms=d.get("terms"),
            text=d.get("text"),
            content_hash=d.get("content_hash"),
            published_at=_millis_or_none(d.get("published_at")),
            bytes=d.get("bytes", 0),
            fetch_ms=d.get("fetch_ms", 0.0),
            echo=dict(d.get("echo") or {}),
            retry_after_ms=d.get("retry_after_ms"),
            crawl_delay_ms=d.get("crawl_delay_ms"),
            failure=d.get("failure"),
            will_retry=d.get("will_retry", False),
            depth=d.get("depth"),
        )


@dataclass(slots=True)
class FrontierEntry:
    """What to fetch next (schema `FrontierEntry`); key = `url`, larger priority = sooner.

    Not frozen, unlike the other records: operators build one per changed link, and a
    frozen dataclass pays for `object.__setattr__` on every field. Treat it as immutable.
    """

    url: str
    host: str
    priority: float
    strategy: str
    crawl_id: str
    cycle: int
    via: str | None
    emitted_at: int
    echo: dict[str, str] = field(default_factory=dict)
    not_before: int | None = None

    def to_avro(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "host": self.host,
            "priority": self.priority,
            "strategy": self.strategy,
            "crawl_id": self.crawl_id,
            "cycle": self.cycle,
            "via": self.via,
            "emitted_at": self.emitted_at,
            "echo": self.echo,
            "not_before": self.not_before,
        }

    @classmethod
    def from_avro(cls, d: dict[str, Any]) -> FrontierEntry:
        return cls(
            url=d["url"],
            host=d["host"],
            priority=d["priority"],
            strategy=d["strategy"],
            crawl_id=d["crawl_id"],
            cycle=d["cycle"],
            via=d.get("via"),
            emitted_at=_millis(d["emitted_at"]),
            echo=dict(d.get("echo") or {}),
            not_before=_millis_or_none(d.get("not_before")),
        )


@dataclass(frozen=True, slots=True)
class ScalingDecision:
    """A thread-count decision for one fetcher over one window (schema `ScalingDecision`)."""

    fetcher_id: str
    window_start: int
    window_end: int
    pages: int
    crawl_speed: float
    speed_mean: float
    speed_stddev: float
    e_cs: float
    e_cs_sign: int
    threads_before: int
    threads_after: int
    learning: bool
    reason: str

    def to_avro(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_avro(cls, d: dict[str, Any]) -> ScalingDecision:
        values = {name: d[name] for name in cls.__slots__}
        values["window_start"] = _millis(values["window_start"])
        values["window_end"] = _millis(values["window_end"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """Input that could not be used, with the reason and the raw bytes (schema `DeadLetter`)."""

    source: str
    partition: int | None
    offset: int | None
    error_class: str
    message: str
    raw: bytes
    at: int

    def to_avro(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_avro(cls, d: dict[str, Any]) -> DeadLetter:
        values = {name: d[name] for name in cls.__slots__}
        values["at"] = _millis(values["at"])
        return cls(**values)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _millis(value: Any) -> int:
    """Epoch millis from an int or a datetime (naive = UTC, as fastavro writes it); exact."""
    if isinstance(value, int):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // timedelta(milliseconds=1)


def _millis_or_none(value: Any) -> int | None:
    return None if value is None else _millis(value)


@dataclass(frozen=True, slots=True)
class SeedRequest:
    """A starting page for a crawl cycle, on the seeds topic (schema `SeedRequest`)."""

    url: str
    requested_at: int
    crawl_id: str = "default"
    cycle: int = 0

    def to_avro(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "crawl_id": self.crawl_id,
            "cycle": self.cycle,
            "requested_at": self.requested_at,
        }

    @classmethod
    def from_avro(cls, d: dict[str, Any]) -> SeedRequest:
        return cls(
            url=d["url"],
            requested_at=_millis(d["requested_at"]),
            crawl_id=d["crawl_id"],
            cycle=d["cycle"],
        )


@dataclass(frozen=True, slots=True)
class Removal:
    """The URL leaves the frontier (a tombstone on the compacted topic)."""

    url: str


FrontierChange = FrontierEntry | Removal

REPLY_ECHO = "reply"
"""Echo field of a FrontierEntry that is one parent's request for one page (LAFC's path
control): the fetcher answers every such entry with exactly one FetchEvent, also when the
page was already fetched in this cycle (then status `ALREADY_FETCHED`, no body), and a
frontier keeps such entries per (url, via) instead of letting the latest replace them."""

ALREADY_FETCHED = 208
"""FetchEvent status of an answer without a download (HTTP 208 Already Reported)."""

REVISIT_ECHO = "revisit"
"""Echo field of a FrontierEntry that asks again for a page already fetched in its cycle (a
scheduled revisit, `--revisit`): its value is the entry's `not_before` in epoch ms. A
fetcher downloads such an entry although the page was fetched in the cycle, once per
value, and copies the field into the FetchEvent like the rest of the echo; the job counts
that answer as the revisit and any later one with the same value as a repeat."""


def revisit_due(echo: dict[str, str]) -> int | None:
    """The due time a revisit entry's echo (or its answer's) carries; None: not a revisit,
    or not a number."""
    value = echo.get(REVISIT_ECHO)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


REPLY_KEY_SEPARATOR = "\x00"
"""Between the URL and the parent's URL in the Kafka key of a reply request."""


def frontier_record_key(change: FrontierChange) -> str:
    """The Kafka key of a frontier record: the URL, or for a reply request the URL and the
    parent's URL joined by `REPLY_KEY_SEPARATOR`, so that compaction keeps every parent's
    request (and a tombstone of the URL leaves them alone) — `change_key` on the wire."""
    key = change_key(change)
    return key if isinstance(key, str) else f"{key[0]}{REPLY_KEY_SEPARATOR}{key[1]}"


def split_frontier_key(key: str) -> str | tuple[str, str]:
    """`change_key` back from a Kafka key `frontier_record_key` made."""
    url, sep, via = key.partition(REPLY_KEY_SEPARATOR)
    return (url, via) if sep else url


def change_key(change: FrontierChange) -> str | tuple[str, str]:
    """Which earlier change a change replaces: the latest per URL, except a reply request
    (see `REPLY_ECHO`), which is one parent's and is kept per (url, via). The step core and
    every frontier reader (the simulator's, the reference fetcher's) use this one rule."""
    if isinstance(change, FrontierEntry) and change.via is not None and REPLY_ECHO in change.echo:
        return change.url, change.via
    return change.url
