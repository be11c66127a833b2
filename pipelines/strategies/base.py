"""The vocabulary every crawl strategy speaks: keyed messages in, frontier changes out.

A FetchEvent is routed (statelessly) into keyed messages — `Seed` and `Fetched` keyed by
the page itself, `Link` keyed by each outlink — and a strategy's `apply` turns one message
plus the key's state into the key's new state and at most one frontier change. `apply` is
pure: no I/O, no wall clock (time arrives in `CrawlClock`), so the embedded engine, the
simulator and Beam run the very same function and a replay is bit-for-bit repeatable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from frontierflow.pipelines.urls import host_of
from frontierflow.schemas.records import FetchEvent, FrontierEntry

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class CrawlClock:
    """Global quantities an operator may read, passed in rather than looked up.

    `crawled` counts the distinct pages fetched in this crawl so far, the page being
    processed included (Algorithm 1 of seed 001 increments `size` before crawling).
    `now_ms` is the event time of the FetchEvent being processed: entries carry it as
    `emitted_at`, so outputs never depend on the wall clock.
    """

    crawled: int
    now_ms: int


class Seed(NamedTuple):
    """Put `url` into the frontier as a starting page of `cycle`."""

    url: str
    crawl_id: str
    cycle: int
    value: float = 0.0


class Fetched(NamedTuple):
    """`url` was fetched in `cycle`; `outlinks` are its distinct outlinks in page order."""

    url: str
    crawl_id: str
    cycle: int
    outlinks: tuple[str, ...]


class Link(NamedTuple):
    """`parent` links to `child` (the key). `value` and `weight` are the strategy's payload.

    Each strategy documents what it sends: IECA the parent's distance and log10 O(parent),
    OPIC the parent's cash share, breadth-first the parent's depth, and so on. Messages
    are NamedTuples: one is built per link, and tuples are the cheapest records to build.
    """

    child: str
    parent: str
    crawl_id: str
    cycle: int
    value: float = 0.0
    weight: float = 0.0


Message = Seed | Fetched | Link


@dataclass(frozen=True, slots=True)
class Removal:
    """The URL leaves the frontier (a tombstone on the compacted topic)."""

    url: str


FrontierChange = FrontierEntry | Removal


@dataclass(frozen=True, slots=True)
class Routed:
    """The keyed messages of one FetchEvent, in the order they must be applied."""

    fetched: Fetched
    links: tuple[Link, ...]


class Strategy(Protocol[S]):
    """A crawl ordering: routing, a pure per-key transition and a state encoding."""

    name: str
    family: str

    def route(self, event: FetchEvent) -> Routed: ...

    def seed(self, url: str, crawl_id: str, cycle: int) -> Seed: ...

    def apply(
        self, key: str, state: S | None, message: Message, clock: CrawlClock
    ) -> tuple[S | None, FrontierChange | None]: ...

    def encode_state(self, state: S) -> bytes: ...

    def decode_state(self, data: bytes) -> S: ...


class GlobalStrategy(Protocol[S]):
    """A strategy that also recomputes over all its state every `interval` crawled pages.

    Batch and partial PageRank are such strategies: the engine commits the step, then
    hands `recompute` a snapshot of every key's state and applies what it returns.
    """

    interval: int

    def recompute(
        self, states: Iterable[tuple[str, S]], clock: CrawlClock
    ) -> tuple[dict[str, S], list[FrontierChange]]: ...


def distinct_outlinks(outlinks: Iterable[str]) -> tuple[str, ...]:
    """Outlinks without repeats, first occurrence order kept; O(i) counts these."""
    return tuple(dict.fromkeys(outlinks))


@dataclass(frozen=True, slots=True)
class EntryFactory:
    """Builds FrontierEntries of one strategy; one place that fills the common fields."""

    strategy: str

    def entry(
        self,
        url: str,
        priority: float,
        crawl_id: str,
        cycle: int,
        via: str | None,
        clock: CrawlClock,
        echo: Mapping[str, str],
    ) -> FrontierEntry:
        return self.entry_owning_echo(url, priority, crawl_id, cycle, via, clock.now_ms, dict(echo))

    def entry_owning_echo(
        self,
        url: str,
        priority: float,
        crawl_id: str,
        cycle: int,
        via: str | None,
        now_ms: int,
        echo: dict[str, str],
    ) -> FrontierEntry:
        """Like `entry`, for a hot path whose `echo` is a fresh dict the entry may keep."""
        return FrontierEntry(
            url, host_of(url), priority, self.strategy, crawl_id, cycle, via, now_ms, echo
        )


def echo_float(echo: Mapping[str, Any], name: str, default: float) -> float:
    """A float the strategy stored in an entry's echo; `default` if absent or unreadable."""
    raw = echo.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return default
    return value if value == value else default  # NaN → default


def fmt_float(value: float) -> str:
    """Exact text form of a float for an echo field (round-trips through float())."""
    return repr(float(value))


class StrategyBase(Generic[S]):
    """Shared plumbing: routing that every strategy uses unless it needs more."""

    name: str = ""
    family: str = ""

    def seed(self, url: str, crawl_id: str, cycle: int) -> Seed:
        return Seed(url=url, crawl_id=crawl_id, cycle=cycle)

    def route(self, event: FetchEvent) -> Routed:
        outlinks = distinct_outlinks(event.outlinks)
        fetched = Fetched(event.url, event.crawl_id, event.cycle, outlinks)
        value, weight = self.link_payload(event, len(outlinks))
        links = tuple(
            Link(child, event.url, event.crawl_id, event.cycle, value, weight) for child in outlinks
        )
        return Routed(fetched, links)

    def link_payload(self, event: FetchEvent, outdegree: int) -> tuple[float, float]:
        """What every Link of this event carries; (0, 0) unless the strategy says more."""
        return 0.0, 0.0
