"""The forager fleet of Palotai, Farkas & Lőrincz 2005 as a strategy: WL, RL and WL+RL foragers
under a reinforcing agent, hunting new relevant documents on a changing site.

State is one `FleetState` per crawl (key `fleet:<crawl id>`; `state/fleet.py` says why the
loop lives in one key). Routing: every FetchEvent that answers a fleet request (its echo
names the forager and the step) becomes one `PageSeen` keyed by the crawl's fleet, with
what the fleet needs from the page — its links, its document state vector x (a hashed
tf-idf projection of its terms, `state/docvector.py`), its publication time and whether
it is on topic. Requests go out as frontier entries:

- `cycle` = the step number, so each download is a first fetch of its cycle (a revisit of
  a hub page is never a repeat for the step core or a fetcher);
- the echo holds `forager.id`, `forager.step`, `forager.role` (visit or probe) and
  `reply` = 1: the fleet waits for every answer (schemas/README.md, "Reply requests"), so
  a probe is kept per (url, via) — two requests for one URL never replace each other
  (a path's first page has no via: a plain entry, which the fleet removes once answered);
- priority 0, −1, −2, … in the order asked: the fleet has one step under way at a time,
  and its probes are served in page order (the direct simulation downloads them so).

On topic (the agent's relevance rule, documented in docs/FORAGERS.md): a page whose terms
carry `meta:article:section=<section>` for a section of `sections` (a news site's
`<meta property="article:section">`; the news-site simulator writes it), or, with a
`topic`, a page the relevance judge finds relevant (LAFC's `--topic` rule). Terms whose
name starts with `meta:` are metadata, not words: they do not enter x.
"""

from __future__ import annotations

from collections.abc import Mapping
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
)
from frontierflow.pipelines.strategies.base import EntryFactory
from frontierflow.schemas.records import REPLY_ECHO, FetchEvent, FrontierEntry, Removal
from frontierflow.state.docvector import DocumentVectors
from frontierflow.state.fleet import (
    Download,
    FleetParams,
    FleetState,
    Request,
    decode_fleet_state,
    encode_fleet_state,
    fleet_key,
    observe,
    seed_fleet,
)
from frontierflow.state.forager import Variant
from frontierflow.state.relevance import Judge, Topic, event_terms

ECHO_FORAGER = "forager.id"
ECHO_STEP = "forager.step"
ECHO_ROLE = "forager.role"
META_PREFIX = "meta:"
SECTION_TERM = "meta:article:section="
"""A page's section as a term: `meta:article:section=Europe` (count 1)."""


@dataclass(frozen=True, slots=True)
class ForagerTopic:
    """What the agent counts as relevant (see the module docstring)."""

    sections: frozenset[str] = frozenset()
    topic: Topic | None = None
    judge: Judge = field(default_factory=lambda: Judge(threshold=0.5))

    def on_topic(self, terms: Mapping[str, int]) -> bool:
        if any(terms.get(SECTION_TERM + s) for s in self.sections):
            return True
        return self.topic is not None and self.judge.relevant(self.topic, terms)


class ForagerFleet(Strategy[FleetState]):
    """The fleet of Palotai, Farkas & Lőrincz 2005 (module docstring); `variant` picks WL,
    RL or WL+RL."""

    family = "fleet"
    routes_links = False
    revisits_pages = False  # the fleet asks for hub pages again itself (a cycle per request)

    def __init__(
        self,
        params: FleetParams,
        topic: ForagerTopic,
        vectors: DocumentVectors | None = None,
    ) -> None:
        self.params = params
        self.topic = topic
        dims = params.forager.dimensions
        self.vectors = vectors if vectors is not None else DocumentVectors([], dims)
        if self.vectors.dimensions != dims:
            raise ValueError(
                f"document vectors have {self.vectors.dimensions} dimensions, not {dims}"
            )
        self.name = f"forager-{params.variant.value}"
        self._entries = EntryFactory(self.name)

    def seed_key(self, url: str, crawl_id: str) -> str:
        return fleet_key(crawl_id)

    def route(self, event: FetchEvent) -> Routed:
        """A fleet request's answer becomes one `PageSeen` for the crawl's fleet; any other
        page (not asked for by a forager) one the fleet counts as stale."""
        echo = event.echo
        try:
            owner, request = int(echo[ECHO_FORAGER]), int(echo[ECHO_STEP])
        except (KeyError, ValueError):
            owner, request = -1, -1
        terms = event_terms(event.terms, event.text) if event.status == 200 else {}
        words = {t: c for t, c in terms.items() if not t.startswith(META_PREFIX)}
        x = self.vectors.vector_of_counts(words)
        outlinks = tuple(dict.fromkeys(event.outlinks)) if event.status == 200 else ()
        published = -1 if event.published_at is None else event.published_at
        seen = PageSeen(
            event.url,
            event.crawl_id,
            event.cycle,
            event.status,
            outlinks,
            tuple(float(v) for v in x),
            published,
            self.topic.on_topic(terms),
            owner,
            request,
        )
        return Routed(seen, (), key=fleet_key(event.crawl_id))

    def apply(
        self, key: str, state: FleetState | None, message: Message, clock: CrawlClock
    ) -> tuple[FleetState | None, Changes | None]:
        if isinstance(message, Seed):
            state, requests, withdrawn = seed_fleet(state, message.url, clock.now_ms, self.params)
            return state, self._changes(requests, withdrawn, message.crawl_id, clock)
        if isinstance(message, PageSeen):
            if state is None:
                return None, None  # no fleet in this crawl yet: nothing asked for the page
            published = None if message.published_ms < 0 else message.published_ms
            download = Download(
                message.url,
                np.asarray(message.vector, dtype=np.float64),
                published,
                message.on_topic,
                message.outlinks,
            )
            state, requests, answered = observe(
                state, message.request, download, clock.now_ms, self.params
            )
            return state, self._changes(requests, answered, message.crawl_id, clock)
        return state, None

    def _changes(
        self, requests: list[Request], removed: str | None, crawl_id: str, clock: CrawlClock
    ) -> Changes | None:
        """The frontier changes of a transition: the removal of a plain entry the fleet no
        longer waits for (withdrawn or answered), then its new requests."""
        entries = self._entries_for(requests, crawl_id, clock)
        if removed is None:
            return entries or None
        return (Removal(removed), *entries)

    def _entries_for(
        self, requests: list[Request], crawl_id: str, clock: CrawlClock
    ) -> tuple[FrontierEntry, ...]:
        entries: list[FrontierEntry] = []
        for i, r in enumerate(requests):
            echo = {
                ECHO_FORAGER: str(r.forager_id),
                ECHO_STEP: str(r.step),
                ECHO_ROLE: r.role.name.lower(),
            }
            if r.via is not None:
                echo[REPLY_ECHO] = "1"
            entries.append(
                self._entries.entry_owning_echo(
                    r.url, -float(i), crawl_id, r.step, r.via, clock.now_ms, echo
                )
            )
        return tuple(entries)

    def encode_state(self, state: FleetState) -> bytes:
        return encode_fleet_state(state)

    def decode_state(self, data: bytes) -> FleetState:
        return decode_fleet_state(data)


FORAGER_VARIANTS = {f"forager-{v.value}": v for v in Variant}
"""CLI names: forager-wl, forager-rl, forager-wlrl."""
