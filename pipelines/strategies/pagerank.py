"""Batch and partial PageRank orderings (Golshani & ZarehBidoki 2012, §IV; Cho et al. 1998;
Baeza-Yates et al. 2005).

Every `interval` crawled pages the strategy computes PageRank over the graph known so far
(crawled pages, their outlinks, and the pages those point to) and re-prioritises every
URL still waiting. Between recomputations a newly found page waits at priority 0 behind
all ranked pages (batch), or is given the temporary estimate Σ PR(p)/O(p) over the parents
that have linked to it so far (partial). A fetched page keeps its outlinks in its state:
that is the known graph.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from frontierflow.pipelines.core.strategy import CrawlClock, Fetched, GlobalStrategy, Link, Message
from frontierflow.pipelines.strategies.base import EntryFactory, echo_float, fmt_float
from frontierflow.schemas.records import FetchEvent, FrontierChange, Removal
from frontierflow.state.pagerank import (
    NOT_CRAWLED,
    RankedUrl,
    decode_ranked,
    encode_ranked,
    pagerank_subgraph,
)

ECHO_RANK = "pr.rank"


class PageRankOrder(GlobalStrategy[RankedUrl]):
    """PageRank on the known graph every `interval` pages; `partial` adds estimates between."""

    def __init__(
        self, interval: int, partial: bool, crawl_id: str = "default", damping: float = 0.85
    ) -> None:
        if interval < 1:
            raise ValueError(f"PageRank recomputation interval must be >= 1, got {interval}")
        self.interval = interval
        self.partial = partial
        self.crawl_id = crawl_id
        self.damping = damping
        self.name = "partial-pagerank" if partial else "pagerank"
        self.family = self.name
        self._entries = EntryFactory(self.name)

    def link_payload(self, event: FetchEvent, outdegree: int) -> tuple[float, float]:
        rank = echo_float(event.echo, ECHO_RANK, 1.0)
        return (rank / outdegree if outdegree else 0.0), 0.0

    def apply(
        self, key: str, state: RankedUrl | None, message: Message, clock: CrawlClock
    ) -> tuple[RankedUrl | None, FrontierChange | None]:
        if isinstance(message, Fetched):
            current = state if state is not None else RankedUrl(1.0)
            cycle = max(current.crawled_cycle, message.cycle)
            return RankedUrl(current.estimate, cycle, current.ranked, message.outlinks), Removal(
                key
            )
        if state is not None and state.crawled_in(message.cycle):
            return state, None
        if isinstance(message, Link):
            new = self._after_link(state, message)
            if new is None:
                return state, None
            via: str | None = message.parent
        else:
            new = RankedUrl(1.0, NOT_CRAWLED if state is None else state.crawled_cycle)
            via = None
        return new, self._entry(key, new.estimate, message.crawl_id, message.cycle, via, clock)

    def _after_link(self, state: RankedUrl | None, link: Link) -> RankedUrl | None:
        if state is not None and (state.ranked or not self.partial):
            return None  # ranked pages wait for the next recomputation; batch never estimates
        if not self.partial:
            return RankedUrl(0.0)
        base = state.estimate if state is not None else 0.0
        return RankedUrl(base + link.value)

    def recompute(
        self, states: Iterable[tuple[str, RankedUrl]], clock: CrawlClock
    ) -> tuple[dict[str, RankedUrl], list[FrontierChange]]:
        """PageRank (damping 0.85) over the known graph; every waiting URL re-prioritised."""
        items = list(states)
        index = {url: i for i, (url, _) in enumerate(items)}
        sources: list[int] = []
        targets: list[int] = []
        for i, (_, state) in enumerate(items):
            for child in state.outlinks:
                j = index.get(child)
                if j is not None:
                    sources.append(i)
                    targets.append(j)
        ranks = pagerank_subgraph(
            np.asarray(sources, dtype=np.int64),
            np.asarray(targets, dtype=np.int64),
            len(items),
            damping=self.damping,
        )
        new_states: dict[str, RankedUrl] = {}
        changes: list[FrontierChange] = []
        for (url, state), rank in zip(items, ranks.tolist(), strict=True):
            new_states[url] = RankedUrl(rank, state.crawled_cycle, True, state.outlinks)
            if state.crawled_cycle == NOT_CRAWLED:
                changes.append(self._entry(url, rank, self.crawl_id, 0, None, clock))
        return new_states, changes

    def _entry(
        self,
        url: str,
        estimate: float,
        crawl_id: str,
        cycle: int,
        via: str | None,
        clock: CrawlClock,
    ) -> FrontierChange:
        echo = {ECHO_RANK: fmt_float(estimate)}
        return self._entries.entry(url, estimate, crawl_id, cycle, via, clock, echo)

    def encode_state(self, state: RankedUrl) -> bytes:
        return encode_ranked(state)

    def decode_state(self, data: bytes) -> RankedUrl:
        return decode_ranked(data)
