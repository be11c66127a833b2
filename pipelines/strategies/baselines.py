"""The simple orderings IECA is compared with (Golshani & ZarehBidoki 2012, Algorithm 2
and §IV).

Breadth-first, backlink count, OPIC and random, each a pure per-URL operator over a
`ScoredUrl`. They differ only in what a link does to the child's score and how the score
becomes a priority, so they share one `apply` and each says just that. Ties between equal
priorities are broken first-come-first-served by the frontier, which makes priority
= −depth an exact breadth-first queue and mirrors Algorithm 2's stable re-sorting.
"""

from __future__ import annotations

import hashlib
import struct

from frontierflow.pipelines.core.strategy import (
    CrawlClock,
    EchoFill,
    Fetched,
    Link,
    Message,
    Strategy,
)
from frontierflow.pipelines.strategies.base import EntryFactory, echo_float, fmt_float
from frontierflow.schemas.records import FetchEvent, FrontierChange, Removal
from frontierflow.state.relevance import Topic, event_terms, similarity
from frontierflow.state.score import ScoredUrl, decode_scored, encode_scored


class ScoredStrategy(Strategy[ScoredUrl]):
    """A baseline defined by a seed score, a link rule and score → priority."""

    echo_key = ""
    changes_own_key = True
    seed_score = 0.0
    echo_fill = EchoFill.PAGE

    def __init__(self) -> None:
        self._entries = EntryFactory(self.name)

    def echo_from_state(self, event: FetchEvent, state: ScoredUrl) -> dict[str, str]:
        """The score of this cycle, which every entry for the page carries."""
        if state.score_cycle != event.cycle:
            return {}
        return {self.echo_key: fmt_float(state.score)}

    def child_score(self, current: ScoredUrl | None, link: Link) -> float | None:
        """The child's new score after `link`, or None when nothing changes."""
        raise NotImplementedError

    def priority(self, score: float) -> float:
        return score

    def seed_score_for(self, url: str) -> float:
        return self.seed_score

    def apply(
        self, key: str, state: ScoredUrl | None, message: Message, clock: CrawlClock
    ) -> tuple[ScoredUrl | None, FrontierChange | None]:
        if isinstance(message, Fetched):
            if state is None:
                return ScoredUrl(self.seed_score_for(key), message.cycle, message.cycle), Removal(
                    key
                )
            cycle = max(state.crawled_cycle, message.cycle)
            return state._replace(crawled_cycle=cycle), Removal(key)
        score: float | None
        if state is not None and state.crawled_in(message.cycle):
            return state, None
        # a score from an earlier cycle is forgotten: a baseline crawls each cycle afresh
        current = state if state is not None and state.score_cycle == message.cycle else None
        if isinstance(message, Link):
            score = self.child_score(current, message)
            via: str | None = message.parent
        else:
            score, via = self.seed_score_for(key), None
        if score is None:
            return state, None
        crawled = state.crawled_cycle if state is not None else -1
        new = ScoredUrl(score, crawled, message.cycle)
        echo = {self.echo_key: fmt_float(score)}
        entry = self._entries.entry(
            key, self.priority(score), message.crawl_id, message.cycle, via, clock, echo
        )
        return new, entry

    def encode_state(self, state: ScoredUrl) -> bytes:
        return encode_scored(state)

    def decode_state(self, data: bytes) -> ScoredUrl:
        return decode_scored(data)


class BreadthFirst(ScoredStrategy):
    """Breadth-first: score = depth in clicks from the seeds, priority = −depth.

    The first link to reach a page fixes its depth (a FIFO queue never reorders).
    """

    name = "bfs"
    family = "bfs"
    echo_key = "bfs.depth"

    def link_payload(self, event: FetchEvent, outdegree: int) -> tuple[float, float]:
        return echo_float(event.echo, self.echo_key, 0.0), 0.0

    def child_score(self, current: ScoredUrl | None, link: Link) -> float | None:
        return link.value + 1.0 if current is None else None

    def priority(self, score: float) -> float:
        return -score


class BacklinkCount(ScoredStrategy):
    """Backlink count (Cho et al. 1998): priority = links seen into the page so far.

    Kept up to date on every link rather than re-sorted every k pages as in Algorithm 2.
    """

    name = "backlink"
    family = "backlink"
    echo_key = "backlink.count"

    def child_score(self, current: ScoredUrl | None, link: Link) -> float | None:
        return (current.score if current is not None else 0.0) + 1.0


class Opic(ScoredStrategy):
    """OPIC (Abiteboul et al. 2003): a fetched page splits its cash evenly over its links.

    Seeds start with cash 1. As in Golshani & ZarehBidoki 2012 each page is crawled once:
    its cash is paid out at its fetch (carried in the echo) and cash reaching crawled pages
    is not kept.
    """

    name = "opic"
    family = "opic"
    echo_key = "opic.cash"
    seed_score = 1.0

    def link_payload(self, event: FetchEvent, outdegree: int) -> tuple[float, float]:
        cash = echo_float(event.echo, self.echo_key, self.seed_score)
        return cash / outdegree if outdegree else 0.0, 0.0

    def child_score(self, current: ScoredUrl | None, link: Link) -> float | None:
        return (current.score if current is not None else 0.0) + link.value


class RandomOrder(ScoredStrategy):
    """Random: each URL draws a fixed uniform priority from (seed, URL) when first seen."""

    name = "random"
    family = "random"
    echo_key = "random.draw"

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self._key = struct.pack("<q", seed)

    def draw(self, url: str) -> float:
        digest = hashlib.blake2b(url.encode(), digest_size=8, key=self._key).digest()
        return int.from_bytes(digest, "little") / 2.0**64

    def child_score(self, current: ScoredUrl | None, link: Link) -> float | None:
        return self.draw(link.child) if current is None else None

    def seed_score_for(self, url: str) -> float:
        return self.draw(url)


class BestFirst(ScoredStrategy):
    """Best-first, the classic focused crawler: a link inherits its parent page's topic
    similarity (Akbari Torkestani 2012, eqs. 4–5), the best seen so far when several pages
    link it.

    Seeds start at 1, so they are fetched first. It does not learn: every cycle repeats the
    first one.
    """

    name = "best-first"
    family = "best-first"
    echo_key = "best-first.sim"
    seed_score = 1.0

    def __init__(self, topic: Topic) -> None:
        super().__init__()
        self.topic = topic

    def link_payload(self, event: FetchEvent, outdegree: int) -> tuple[float, float]:
        return similarity(self.topic, event_terms(event.terms, event.text)), 0.0

    def child_score(self, current: ScoredUrl | None, link: Link) -> float | None:
        if current is None:
            return link.value
        return link.value if link.value > current.score else None
