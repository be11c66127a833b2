"""The forager fleet through the embedded engine: the closed loop of Palotai, Farkas &
Lőrincz 2005 (CEEMAS) with the strategy operator
(`pipelines/strategies/foragers.ForagerFleet`) in the engine and a simulated fetcher serving
its frontier from the news site — the same operator a live job runs over Kafka.

The fetcher takes the frontier's best entry, downloads the page as it was at the simulated
time, spends `download_ms`, and reports the FetchEvent a real fetcher would: the page's
links, its terms (those its x is made of, plus its section as `meta:article:section=…`, as
a news page's meta tag states it), its publication time and the entry's echo. It stops at
the first step the fleet begins at or after the end of the run, as `run_fleet` does, so the
two runs are the same walk (a test holds them equal).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from frontierflow.connectors.base import Position
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup
from frontierflow.pipelines.evaluation.news_site import NewsSite
from frontierflow.pipelines.evaluation.simulator import MemoryFrontier
from frontierflow.pipelines.strategies.foragers import (
    ECHO_ROLE,
    SECTION_TERM,
    ForagerFleet,
    ForagerTopic,
)
from frontierflow.schemas.records import FetchEvent, FrontierEntry
from frontierflow.state.fleet import FleetCounters, FleetParams, FleetState, fleet_key
from frontierflow.state.forager import Variant
from frontierflow.state.storage.memory import InMemoryStore
from frontierflow.state.urls import host_of


@dataclass(frozen=True, slots=True)
class EngineRun:
    counters: FleetCounters
    population: int
    events: int
    state: bytes
    """The fleet's encoded state at the end."""


def fleet_strategy(
    site: NewsSite, setup: ForagerSetup, variant: Variant, seed: int
) -> ForagerFleet:
    """The fleet operator for `setup`: its constants, its topic's sections, the site's x."""
    params = FleetParams(variant, seed, setup.params, setup.agent)
    return ForagerFleet(params, ForagerTopic(frozenset(setup.topic)), site.vectors)


def news_fetch_event(
    site: NewsSite, entry: FrontierEntry, t: int, download_ms: int, crawl_id: str
) -> FetchEvent:
    """The FetchEvent of downloading `entry`'s page as it was at `t`, done `download_ms`
    later: its links, its terms (those its x is made of, and its section as
    `meta:article:section=…`), its publication time, the entry's echo, via and cycle."""
    page = site.page(entry.url, t)
    terms = dict(page.terms)
    if page.section is not None:
        terms[SECTION_TERM + page.section] = 1
    return FetchEvent(
        url=entry.url,
        fetched_at=t + download_ms,
        status=200,
        fetcher_id="news-site",
        host=host_of(entry.url),
        via=entry.via,
        crawl_id=crawl_id,
        cycle=entry.cycle,
        outlinks=page.links,
        terms=terms,
        published_at=page.published_ms,
        echo=entry.echo,
    )


def run_fleet_on_engine(
    site: NewsSite,
    setup: ForagerSetup,
    variant: Variant,
    seed: int,
    *,
    crawl_id: str = "news",
    on_event: Callable[[FetchEvent], None] | None = None,
    strategy: ForagerFleet | None = None,
) -> EngineRun:
    """One closed-loop run of the fleet operator in the engine (module docstring);
    `strategy` replaces `fleet_strategy`'s (a job's, built from its command line)."""
    if strategy is None:
        strategy = fleet_strategy(site, setup, variant, seed)
    frontier = MemoryFrontier()
    store = InMemoryStore(Engine.families_for(strategy))
    engine = Engine(strategy, store, frontier, source_name="news-site")
    engine.seed(site.seeds(setup.params.start_list), crawl_id=crawl_id, now_ms=site.start_ms)
    t, n = site.start_ms, 0
    while True:
        entry = frontier.pop()
        if entry is None or (t >= site.end_ms and entry.echo.get(ECHO_ROLE) == "visit"):
            break
        event = news_fetch_event(site, entry, t, setup.download_ms, crawl_id)
        t = event.fetched_at
        if on_event is not None:
            on_event(event)
        engine.run_step([(Position(None, n), event, b"")])
        n += 1
    raw = store.get(strategy.family, fleet_key(crawl_id).encode())
    assert raw is not None, "the fleet was seeded"
    state: FleetState = strategy.decode_state(raw)
    return EngineRun(state.counters, len(state.fleet.foragers), n, raw)
