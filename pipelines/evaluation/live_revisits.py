"""A crawl of the news site with scheduled revisits (`--revisit`) through the embedded engine,
in simulated time: the closed loop a live job runs with the news-site fetcher
(`forager_engine.news_fetch_event`), for the tests that hold the live job, a replay and the
Beam replay to it.

The fetcher serves the frontier as the reference fetcher does (`DueFrontier`): the best
entry whose `not_before` has passed, and when none has, it waits for the earliest one. Each
download takes `download_ms`; the crawl stops at the first entry it would take at or after
the site's end.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from frontierflow.connectors.base import Position, Sink
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.evaluation.forager_engine import news_fetch_event
from frontierflow.pipelines.evaluation.news_site import HOME, NewsSite
from frontierflow.schemas.frontier_view import FrontierView, Key
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    Removal,
    change_key,
)
from frontierflow.state.revisit_schedule import RevisitPolicy
from frontierflow.state.storage.memory import InMemoryStore
from frontierflow.state.storage.store import StateStore


class DueFrontier(Sink):
    """The frontier as a fetcher serves it: the latest entry per record key, the best one
    whose `not_before` has passed first (ties in the order their keys first came)."""

    def __init__(self) -> None:
        self.view: FrontierView[FrontierEntry] = FrontierView()
        self._first: dict[Key, int] = {}
        self._heap: list[tuple[float, int, int, FrontierEntry]] = []
        self._pushes = 0

    def __len__(self) -> int:
        return len(self.view)

    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None:
        for change in changes:
            self.apply(change)

    def apply(self, change: FrontierChange) -> None:
        """One frontier record, as read from the topic."""
        if isinstance(change, Removal):
            self.view.tombstone(change.url)
            return
        key = change_key(change)
        first = self._first.setdefault(key, len(self._first))
        self.view.put(key, change)
        self._pushes += 1
        heapq.heappush(self._heap, (-change.priority, first, self._pushes, change))

    def flush(self) -> bytes:
        return b""

    def rewind(self, position: bytes | None) -> None:
        return None

    def pop(self, now_ms: int) -> FrontierEntry | None:
        """Take the best entry due at `now_ms`, or None when none is."""
        held: list[tuple[float, int, int, FrontierEntry]] = []
        found = None
        while self._heap:
            item = heapq.heappop(self._heap)
            entry = item[3]
            if not self.view.is_current(change_key(entry), entry):
                continue
            if (entry.not_before or 0) > now_ms:
                held.append(item)
                continue
            self.view.take(change_key(entry), entry)
            found = entry
            break
        for item in held:
            heapq.heappush(self._heap, item)
        return found

    def next_due(self) -> int | None:
        """When the earliest held entry comes due; None when the frontier is empty."""
        return min((e.not_before or 0 for e in self.view.values()), default=None)


@dataclass(frozen=True, slots=True)
class NewsCrawl:
    events: list[FetchEvent]
    """Every FetchEvent the fetcher sent, in order."""
    store: StateStore
    """The engine's state at the end."""


def crawl_news_site(
    site: NewsSite,
    strategy: Strategy[Any],
    revisit: RevisitPolicy | None,
    *,
    download_ms: int,
    crawl_id: str = "news",
    seeds: Sequence[str] = (HOME,),
    on_event: Callable[[FetchEvent], None] | None = None,
) -> NewsCrawl:
    """The closed loop of the module docstring from `seeds` at the site's start."""
    frontier = DueFrontier()
    store = InMemoryStore(Engine.families_for(strategy, revisit=revisit is not None))
    engine = Engine(strategy, store, frontier, source_name="news-site", revisit=revisit)
    engine.seed(seeds, crawl_id=crawl_id, now_ms=site.start_ms)
    t = site.start_ms
    events: list[FetchEvent] = []
    while True:
        entry = frontier.pop(t)
        if entry is None:
            wake = frontier.next_due()
            if wake is None:
                break
            t = max(t, wake)
            continue
        if t >= site.end_ms:
            break
        event = news_fetch_event(site, entry, t, download_ms, crawl_id)
        t = event.fetched_at
        if on_event is not None:
            on_event(event)
        engine.run_step([(Position(None, len(events)), event, b"")])
        events.append(event)
    return NewsCrawl(events, store)
