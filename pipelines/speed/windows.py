"""One fetcher's event-time windows: which windows an event belongs to, how it is counted in
one, how two partial sums of a window merge, and the crawl speed of a window (Nandy, Sarkar
& Das 2012, eq. 1). The window record itself is `frontierflow.state.speed.SpeedWindow`.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left

from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.speed import HOST_SAMPLE, SpeedWindow


def is_failure(status: int) -> bool:
    """A fetch that tells the fetcher to slow down: no answer, or 429/503 (AIMD's signal)."""
    return status <= 0 or status in (429, 503)


def host_hash(host: str) -> int:
    """A stable 64-bit hash of a host name (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(host.encode(), digest_size=8).digest(), "big")


def merge_hosts(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The smallest HOST_SAMPLE distinct hashes of both samples (order-independent)."""
    if not b or set(b) <= set(a):
        return a
    return tuple(sorted(set(a) | set(b))[:HOST_SAMPLE])


def add_host(hosts: tuple[int, ...], hashed: int) -> tuple[int, ...]:
    """`merge_hosts(hosts, (hashed,))` for one hash, without building sets: `hosts` is a
    sample (sorted, distinct, at most HOST_SAMPLE), so one binary search finds its place."""
    i = bisect_left(hosts, hashed)
    if i >= HOST_SAMPLE or (i < len(hosts) and hosts[i] == hashed):
        return hosts
    return (*hosts[:i], hashed, *hosts[i : HOST_SAMPLE - 1])


def add_event(window: SpeedWindow, event: FetchEvent, hashed: int | None = None) -> SpeedWindow:
    """The window with one more event counted (`hashed`: `host_hash(event.host)` when the
    caller has it)."""
    failed = is_failure(event.status)
    return SpeedWindow(
        window.start_ms,
        window.end_ms,
        window.pages + (0 if failed else 1),
        window.failures + (1 if failed else 0),
        window.bytes + event.bytes,
        window.fetch_us + round(event.fetch_ms * 1000.0),
        window.events + 1,
        add_host(window.hosts, host_hash(event.host) if hashed is None else hashed),
    )


def merge_windows(a: SpeedWindow, b: SpeedWindow) -> SpeedWindow:
    """Two partial sums of the same window (Beam's merge_accumulators)."""
    return SpeedWindow(
        a.start_ms,
        a.end_ms,
        a.pages + b.pages,
        a.failures + b.failures,
        a.bytes + b.bytes,
        a.fetch_us + b.fetch_us,
        a.events + b.events,
        merge_hosts(a.hosts, b.hosts),
    )


def window_starts(fetched_at: int, settings: ControllerSettings) -> list[int]:
    """Starts of every window holding `fetched_at`, oldest first (Beam's assignment with
    offset 0: start = t − t mod slide, and the L/slide − 1 windows before it)."""
    slide = settings.slide
    last = fetched_at - fetched_at % slide
    count = settings.window_ms // slide
    return [last - k * slide for k in range(count - 1, -1, -1)]


def crawl_speed(pages: int, window_ms: int) -> float:
    """Nandy, Sarkar & Das 2012, eq. 1: C_s = visited pages / crawling time, here the
    window's length."""
    return pages / (window_ms / 1000.0)


def mean_fetch_ms(window: SpeedWindow) -> float:
    """Mean latency of the window's fetches in ms (0 for an empty window)."""
    return window.fetch_us / 1000.0 / window.events if window.events else 0.0
