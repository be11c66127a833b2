"""A TRES-style learner as a crawl strategy: Kontogiannis et al. 2021, "Tree-based Focused Web
Crawling with Reinforcement Learning" (arXiv 2112.07620), kept small — a linear Q over the
link features the other strategies see, a Tree-Frontier, reward 1 for a relevant page fetched.
What it follows and where it departs: `frontierflow.state.tres`.

The learner chooses one link at a time from a frontier that spans the whole crawl, so its state
is one per crawl (key `tres:<crawl id>`), as the forager fleet's is: every FetchEvent becomes
one `PageSeen` for that key carrying the page's topic similarity, the judge's verdict and its
links; the key answers with the removal of the fetched page's entry and one entry for the next
link (its Q value as priority), or none when its frontier is empty. Seeds are asked for first,
one at a time, in the order given; each cycle starts its frontier afresh and keeps what was
learned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from frontierflow.pipelines.core.strategy import (
    Changes,
    CrawlClock,
    Message,
    PageSeen,
    Routed,
    Seed,
    Strategy,
    distinct_outlinks,
)
from frontierflow.pipelines.strategies.base import EntryFactory
from frontierflow.schemas.records import FetchEvent, FrontierChange, Removal
from frontierflow.state.relevance import Judge, Topic, event_terms, similarity, url_terms
from frontierflow.state.tres import TresParams, TresState, add_seed, choose, observe, start_cycle
from frontierflow.state.tres_codec import decode_tres, encode_tres

KEY_PREFIX = "tres:"


def learner_key(crawl_id: str) -> str:
    """The key of a crawl's learner."""
    return KEY_PREFIX + crawl_id


@dataclass(frozen=True, slots=True)
class TresSettings:
    """The learner's constants and the judge whose verdict is its reward."""

    params: TresParams = field(default_factory=TresParams)
    judge: Judge = field(default_factory=Judge)


class Tres(Strategy[TresState]):
    """The TRES-style learner (module docstring)."""

    name = "tres"
    family = "tres"
    routes_links = False
    revisits_pages = False  # one learner asks for every page; a revisit is not its request

    def __init__(self, topic: Topic, settings: TresSettings | None = None) -> None:
        self.topic = topic
        self.settings = settings if settings is not None else TresSettings()
        self.params = self.settings.params
        self._entries = EntryFactory(self.name)

    def seed_key(self, url: str, crawl_id: str) -> str:
        return learner_key(crawl_id)

    def route(self, event: FetchEvent) -> Routed:
        """One `PageSeen` for the crawl's learner: `vector` holds the page's topic similarity,
        `on_topic` the judge's verdict (a failed fetch: 0, not relevant, no links)."""
        ok = event.status == 200
        terms = event_terms(event.terms, event.text) if ok else {}
        links = distinct_outlinks(event.outlinks) if ok else ()
        seen = PageSeen(
            event.url,
            event.crawl_id,
            event.cycle,
            event.status,
            links,
            (similarity(self.topic, terms),),
            -1,
            self.settings.judge.relevant(self.topic, terms) if ok else False,
            -1,
            -1,
        )
        return Routed(seen, (), key=learner_key(event.crawl_id))

    def apply(
        self, key: str, state: TresState | None, message: Message, clock: CrawlClock
    ) -> tuple[TresState | None, Changes | None]:
        if isinstance(message, Seed):
            state = state if state is not None else TresState()
            if message.cycle != state.cycle:
                start_cycle(state, message.cycle)
            add_seed(state, message.url)
            if state.pending:
                return state, None
            return state, self._next(state, message.crawl_id, message.cycle, clock, ())
        if not isinstance(message, PageSeen) or state is None or message.cycle != state.cycle:
            return state, None
        if message.url != state.pending and message.url in state.fetched:
            return state, None  # a repeat: nothing new
        links = list(message.outlinks)
        url_similarities = np.fromiter(
            (similarity(self.topic, url_terms(link)) for link in links), float, len(links)
        )
        observe(
            state,
            message.url,
            message.vector[0],
            message.on_topic,
            links,
            url_similarities,
            self.params,
        )
        if state.pending:
            return state, Removal(message.url)
        return state, self._next(state, message.crawl_id, message.cycle, clock, (message.url,))

    def _next(
        self, state: TresState, crawl_id: str, cycle: int, clock: CrawlClock, done: tuple[str, ...]
    ) -> Changes | None:
        """The removals of `done`, then the entry for the next link chosen, if any."""
        changes: list[FrontierChange] = [Removal(url) for url in done]
        choice = choose(state, self.params)
        if choice is not None:
            changes.append(
                self._entries.entry(choice.url, choice.value, crawl_id, cycle, None, clock, {})
            )
        if not changes:
            return None
        return changes[0] if len(changes) == 1 else tuple(changes)

    def encode_state(self, state: TresState) -> bytes:
        return encode_tres(state)

    def decode_state(self, data: bytes) -> TresState:
        return decode_tres(data)
