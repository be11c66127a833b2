"""A closed-loop crawl over a recorded web graph, standing in for the fetchers.

The simulator serves the frontier's best entry, "fetches" that node of the graph and
emits the FetchEvent a fetcher would (its outlinks, and the entry's echo), and the
embedded engine — the same strategy operators and commit path as a live run, with an
in-memory store — turns it into frontier changes. Ties in priority are served in the
order the URLs first entered the frontier, as a FIFO queue re-sorted stably would.
"""

from __future__ import annotations

import heapq
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from frontierflow.connectors.base import Position, Sink
from frontierflow.connectors.webgraph import WebGraph, node_url, url_node
from frontierflow.pipelines.core.strategy import Strategy, change_key
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.schemas.frontier_view import FrontierView
from frontierflow.schemas.records import (
    ALREADY_FETCHED,
    DeadLetter,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    Removal,
)
from frontierflow.state.storage.memory import InMemoryStore

log = logging.getLogger(__name__)


class MemoryFrontier(Sink):
    """A priority queue fed by frontier changes: the fetchers' view of the compacted topic.

    Larger priority first; equal priorities in the order their keys first entered (kept
    across a key's removal). Which entry is live is `schemas.frontier_view`'s rule: the
    latest per `change_key`, a removal of a URL sparing its reply requests. Updates re-push
    and the stale heap items are skipped on pop.
    """

    def __init__(self) -> None:
        self._entries: FrontierView[FrontierEntry] = FrontierView()
        self._first_seen: dict[str | tuple[str, str], int] = {}
        self._heap: list[tuple[float, int, int, FrontierEntry]] = []
        self._seq = 0
        self._pushes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None:
        put, tombstone = self._entries.put, self._entries.tombstone
        first_seen, heap = self._first_seen, self._heap
        for change in changes:
            if isinstance(change, Removal):
                tombstone(change.url)
                continue
            key = change_key(change)
            first = first_seen.get(key)
            if first is None:
                first = first_seen[key] = self._seq
                self._seq += 1
            put(key, change)
            self._pushes += 1
            heapq.heappush(heap, (-change.priority, first, self._pushes, change))

    def flush(self) -> bytes:
        return b""

    def rewind(self, position: bytes | None) -> None:
        return None

    def clear(self) -> None:
        """Forget every entry (a new crawl cycle starts from its seeds)."""
        self._entries.clear()
        self._first_seen.clear()
        self._heap.clear()

    def pop(self) -> FrontierEntry | None:
        """Remove and return the best entry, or None when the frontier is empty."""
        heap, take = self._heap, self._entries.take
        while heap:
            entry = heapq.heappop(heap)[3]
            if take(change_key(entry), entry):
                return entry
        return None


@dataclass(frozen=True, slots=True)
class CrawlProgress:
    """Where a simulated crawl stands after a fetch."""

    crawled: int
    frontier: int


def simulate_crawl(
    graph: WebGraph,
    strategy: Strategy[object],
    seeds: Sequence[int],
    stop_count: int,
    *,
    crawl_id: str = "sim",
    on_fetch: Callable[[int, CrawlProgress], None] | None = None,
) -> np.ndarray:
    """Crawl `graph` with `strategy` from `seeds` until `stop_count` pages are fetched or
    the frontier empties; returns the fetched node ids in fetch order (int64)."""
    urls = [node_url(i) for i in range(graph.num_nodes)]
    frontier = MemoryFrontier()
    store = InMemoryStore(Engine.families_for(strategy))
    engine = Engine(strategy, store, frontier, source_name="simulator")
    engine.seed((urls[s] for s in seeds), crawl_id=crawl_id)
    order = np.empty(stop_count, dtype=np.int64)
    crawled = 0
    offsets, successors = graph.offsets, graph.successors
    for entry in _drain(frontier, stop_count):
        node = url_node(entry.url)
        outlinks = tuple(urls[j] for j in successors[offsets[node] : offsets[node + 1]].tolist())
        event = FetchEvent(
            url=entry.url,
            fetched_at=crawled,
            status=200,
            fetcher_id="simulator",
            host=entry.host,
            via=entry.via,
            crawl_id=crawl_id,
            cycle=entry.cycle,
            outlinks=outlinks,
            echo=entry.echo,
        )
        engine.run_step([(Position(None, crawled), event, b"")])
        order[crawled] = node
        crawled += 1
        if on_fetch is not None:
            on_fetch(node, CrawlProgress(crawled, len(frontier)))
    return order[:crawled]


class RecordedWeb(Protocol):
    """A web with page texts: what a focused crawl needs (connectors/topicalweb.py)."""

    @property
    def urls(self) -> Sequence[str]: ...

    @property
    def terms(self) -> Sequence[dict[str, int]]: ...

    def outlinks(self, i: int) -> np.ndarray: ...

    def index_of(self, url: str) -> int: ...


@dataclass(frozen=True, slots=True)
class CycleCrawl:
    """One cycle of a closed-loop crawl: the pages downloaded, in order, and how many
    entries were answered without a download (the page was already fetched this cycle)."""

    cycle: int
    downloaded: np.ndarray
    answered: int


def simulate_cycles(
    web: RecordedWeb,
    strategy: Strategy[object],
    seeds: Sequence[int],
    budget: int,
    cycles: int,
    *,
    crawl_id: str = "sim",
    on_event: Callable[[FetchEvent], None] | None = None,
) -> list[CycleCrawl]:
    """Crawl `web` `cycles` times from `seeds`, each cycle until `budget` pages are downloaded
    or the frontier empties, keeping the strategy's state from cycle to cycle.

    The simulated fetcher downloads the best entry's page and reports its terms and outlinks;
    an entry for a page already downloaded in this cycle is answered with status 208 and no
    body (what `REPLY_ECHO` asks of a fetcher) and costs no download. Event time advances by
    1 ms per answer, so push times are distinct and later pushes come first. `on_event` sees
    every FetchEvent, to record the crawl as a log.
    """
    if budget < 1 or cycles < 1:
        raise ValueError("budget and cycles must be >= 1")
    urls = web.urls
    frontier = MemoryFrontier()
    store = InMemoryStore(Engine.families_for(strategy))
    engine = Engine(strategy, store, frontier, source_name="simulator")
    # `web.index_of` of each entry URL served so far: a page is asked for again and again
    # (most entries of a learning crawl are answered 208), its URL normalised once
    pages: dict[str, int] = {}
    tick = 0
    out = []
    for cycle in range(cycles):
        frontier.clear()
        tick += 1
        engine.seed((urls[s] for s in seeds), crawl_id=crawl_id, cycle=cycle, now_ms=tick)
        fetched: set[int] = set()
        order: list[int] = []
        answered = 0
        while len(order) < budget:
            entry = frontier.pop()
            if entry is None:
                break
            page = pages.get(entry.url)
            if page is None:
                page = pages[entry.url] = web.index_of(entry.url)
            tick += 1
            outlinks: tuple[str, ...] = ()
            terms: dict[str, int] | None = None
            if page in fetched:
                status = ALREADY_FETCHED
                answered += 1
            else:
                status = 200
                outlinks = tuple(urls[j] for j in web.outlinks(page).tolist())
                terms = web.terms[page]
                fetched.add(page)
                order.append(page)
            event = FetchEvent(
                url=entry.url,
                fetched_at=tick,
                status=status,
                fetcher_id="simulator",
                host=entry.host,
                via=entry.via,
                crawl_id=crawl_id,
                cycle=cycle,
                outlinks=outlinks,
                terms=terms,
                echo=entry.echo,
            )
            engine.run_step([(Position(None, tick), event, b"")])
            if on_event is not None:
                on_event(event)
        out.append(CycleCrawl(cycle, np.asarray(order, dtype=np.int64), answered))
    return out


def _drain(frontier: MemoryFrontier, limit: int) -> Iterator[FrontierEntry]:
    for _ in range(limit):
        entry = frontier.pop()
        if entry is None:
            return
        yield entry


def hot_fraction_curve(
    order: np.ndarray, global_rank: np.ndarray, checkpoints: Sequence[int]
) -> list[float]:
    """Golshani & ZarehBidoki 2012 §IV's throughput: after K fetches, the share of the K
    pages with the highest global PageRank that were among them ("hot" pages), at each K in
    checkpoints.

    `global_rank[node]` is the node's 0-based position in the global PageRank order.
    """
    ranks_in_order = global_rank[order]
    out = []
    for k in checkpoints:
        if k <= 0 or k > len(order):
            raise ValueError(f"checkpoint {k} outside 1..{len(order)}")
        out.append(float(np.count_nonzero(ranks_in_order[:k] < k)) / k)
    return out


def rank_positions(scores: np.ndarray) -> np.ndarray:
    """0-based position of each node when sorted by descending score (ties by node id)."""
    order = np.lexsort((np.arange(len(scores)), -scores))
    positions = np.empty(len(scores), dtype=np.int64)
    positions[order] = np.arange(len(scores))
    return positions
