"""The vocabulary every crawl strategy speaks: keyed messages in, frontier changes out.

A FetchEvent is routed (statelessly) into keyed messages — `Seed` and `Fetched` keyed by
the page itself, `Link` keyed by each outlink — and a strategy's `apply` turns one message
plus the key's state into the key's new state and at most one frontier change. `apply` is
pure: no I/O, no wall clock (time arrives in `CrawlClock`), so the embedded engine, the
simulator and Beam run the very same function and a replay is bit-for-bit repeatable.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from itertools import repeat
from typing import ClassVar, Generic, NamedTuple, TypeAlias, TypeVar

from frontierflow.schemas.records import (
    FetchEvent,
    FrontierChange,
)
from frontierflow.schemas.records import change_key as change_key  # one rule, in schemas/

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class CrawlClock:
    """Global quantities an operator may read, passed in rather than looked up.

    `crawled` counts the distinct pages fetched in this crawl so far, the page being
    processed included (Golshani & ZarehBidoki 2012's Algorithm 1 increments `size` before
    crawling). `now_ms` is the event time of the FetchEvent being processed: entries carry
    it as `emitted_at`, so outputs never depend on the wall clock.
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
    """`url` was fetched in `cycle`; `outlinks` are its distinct outlinks in page order.

    `value` is what the strategy read off the page itself (LAFC: its topic similarity).
    `path` is, for a strategy that credits along the crawl path (LAFC+), the pages whose
    choices led here, nearest first; empty otherwise.
    """

    url: str
    crawl_id: str
    cycle: int
    outlinks: tuple[str, ...]
    value: float = 0.0
    path: tuple[str, ...] = ()


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


class Reinforce(NamedTuple):
    """The page `child` that `parent` (the key) chose came back: `value` is what the child
    turned out to be worth (LAFC: its similarity). `fresh` is False when the child had
    already been fetched in this cycle, so the choice is dropped without learning. `credit`
    marks a reward passed further up the crawl path (`Routed.credits`): `child` is then the
    parent's action that led toward the page that earned it, and no choice is answered."""

    parent: str
    child: str
    crawl_id: str
    cycle: int
    value: float = 0.0
    fresh: bool = True
    credit: bool = False


class PageSeen(NamedTuple):
    """A fetched page as a strategy that keys its state by something other than the page
    sees it (the forager fleet, keyed by crawl: `Routed.key`). `owner` and `request` say
    which request of which requester the fetch answers (a forager's id and its step, read
    from the echo); `vector` is the page's document state vector; `published_ms` is −1 when
    the page states no publication time."""

    url: str
    crawl_id: str
    cycle: int
    status: int
    outlinks: tuple[str, ...]
    vector: tuple[float, ...]
    published_ms: int
    on_topic: bool
    owner: int
    request: int


Message: TypeAlias = Seed | Fetched | Link | Reinforce | PageSeen


class Inlink(NamedTuple):
    """A `Link` without its child: what every Link of one page carries, the child being
    the key the Inlink is queued under (`Routed.inlink`). A page's dozens of links differ
    only in their child, so an engine that queues messages per key (the embedded step)
    queues one shared (clock, Inlink) pair in each child's queue instead of a Link and a
    pair per child; a strategy's fold reads it as the Link `link(key)` (its fields are
    named as the Link's)."""

    parent: str
    crawl_id: str
    cycle: int
    value: float = 0.0
    weight: float = 0.0

    def link(self, child: str) -> Link:
        """The Link to `child` this stands for."""
        return tuple.__new__(Link, (child, *self))


Queued: TypeAlias = tuple[CrawlClock, Message | Inlink]
"""A message queued for a key with the clock it is applied at; an `Inlink` stands for the
Link to that key (`as_messages`)."""

Changes: TypeAlias = FrontierChange | tuple[FrontierChange, ...]
"""What one `apply` emits: none, one change, or (rarely) several, in order."""


@dataclass(frozen=True, slots=True)
class Routed:
    """The keyed messages of one FetchEvent, in the order they must be applied: the page's
    own `fetched`, then `reinforce` to the parent that chose it (if the strategy learns from
    choices), then `credits` to pages further up the path that led here (each keyed by its
    `parent`; a strategy with eligibility traces), then one Link per child in `children`,
    each `inlink` with its child (`links`)."""

    fetched: Fetched | PageSeen
    children: tuple[str, ...]
    """The keys of the event's Links, in order (none for a strategy that routes no links)."""
    reinforce: Reinforce | None = None
    credits: tuple[Reinforce, ...] = ()
    key: str | None = None
    """The key of `fetched` when it is not the page itself (a fleet keyed by crawl)."""
    inlink: Inlink | None = None
    """What each Link to `children` carries besides its child; None when there are none."""

    @property
    def links(self) -> tuple[Link, ...]:
        """One Link per child, in order."""
        if self.inlink is None:
            return ()
        return links_to(self.children, *self.inlink)

    def head(self) -> list[tuple[str, Message]]:
        """The (key, message) pairs before the Links, in application order."""
        own = self.fetched.url if self.key is None else self.key
        head: list[tuple[str, Message]] = [(own, self.fetched)]
        if self.reinforce is not None:
            head.append((self.reinforce.parent, self.reinforce))
        if self.credits:
            head.extend((credit.parent, credit) for credit in self.credits)
        return head

    def messages(self) -> tuple[tuple[str, Message], ...]:
        """(key, message) pairs in application order: the one place that lists them (the
        embedded step queues the same order through `head`, then `children`)."""
        return (*self.head(), *zip(self.children, self.links, strict=True))


class EchoFill(Enum):
    """Which key's state tells what a FetchEvent's echo would have carried, for a log whose
    events carry none (a WARC, another crawler's log): see `Strategy.echo_from_state`."""

    NONE = "none"
    """The strategy reads no echo."""
    PAGE = "page"
    """The fetched page's own state (the entry that led to the fetch was the page's)."""
    PARENT = "parent"
    """The state of the page the event came `via` (the entry was the parent's choice)."""


class Strategy(ABC, Generic[S]):
    """A crawl ordering: routing, a pure per-key transition and a state encoding.

    What a strategy needs from an engine it declares here, as class attributes, and the
    engines read them; nothing is probed. A strategy that also recomputes over all its
    state is a `GlobalStrategy`.
    """

    name: str = ""
    family: str = ""
    """The state store's column family of this strategy's per-URL states."""
    routes_links: ClassVar[bool] = True
    """Whether `route` sends a Link to every outlink (the engine prefetches their states)."""
    learns_from_repeats: ClassVar[bool] = False
    """Whether a repeated fetch still carries news: its Reinforce goes to the parent."""
    echo_fill: ClassVar[EchoFill] = EchoFill.NONE
    """Whose state `echo_from_state` reads when an event carries no echo."""
    immutable_states: ClassVar[bool] = False
    """Whether `apply` never changes a state object in place (each change makes a new one,
    as NamedTuple states do), so an engine may keep decoded states across steps."""
    judges_pages: ClassVar[bool] = False
    """Whether a first fetch's `Fetched.value` is the page's topic similarity (Akbari
    Torkestani 2012, eqs. 4–5), so an onlooker can tell the harvest rate from it."""
    revisits_pages: ClassVar[bool] = True
    """Whether the job may schedule revisits of its pages (`--revisit`): a revisit's answer
    is routed as the page's first fetch was. False for a strategy that asks for pages
    again by its own rule."""
    requests_replies: ClassVar[bool] = False
    """Whether an entry it emits may be a reply request (`REPLY_ECHO`), which
    `change_key` keeps per (url, via). Without them every change's key is its URL, and
    the step core keeps the latest change per key in one pass (`apply_pending`)."""
    changes_own_key: ClassVar[bool] = False
    """Whether every change a key's messages emit is for that key's own URL, so the
    changes of many keys folded at once can be told apart by URL (the bounded Beam
    replay folds a shard's keys in one `apply_pending` then: `beam.shard_blocks`)."""

    def echo_from_state(self, event: FetchEvent, state: S) -> dict[str, str]:
        """The echo the frontier entry that led to `event` carried, derived from the state,
        at fetch time, of the key `echo_fill` names; {} when the state says nothing (the
        event is then routed as it came). Exact when each entry's echo was that key's state
        when the entry was last emitted, as every strategy here writes its entries. Read
        only the event's `url`, `via`, `crawl_id`, `cycle` and `fetched_at`: the bounded
        Beam replay probes the key's state with those alone."""
        return {}

    def seed(self, url: str, crawl_id: str, cycle: int) -> Seed:
        return Seed(url=url, crawl_id=crawl_id, cycle=cycle)

    def seed_key(self, url: str, crawl_id: str) -> str:
        """The key a seed's message goes to: the page itself, unless the strategy keeps
        its state elsewhere (the forager fleet: one key per crawl)."""
        return url

    def route(self, event: FetchEvent) -> Routed:
        """The keyed messages of a first fetch of `event.url` (see `Routed`)."""
        outlinks = distinct_outlinks(event.outlinks)
        fetched = Fetched(event.url, event.crawl_id, event.cycle, outlinks)
        value, weight = self.link_payload(event, len(outlinks))
        inlink = Inlink(event.url, event.crawl_id, event.cycle, value, weight)
        return Routed(fetched, outlinks, inlink=inlink)

    def repeat_reinforce(self, event: FetchEvent) -> Reinforce | None:
        """What a repeat fetch of `event.url` tells the parent that chose it (the only
        message of a repeat, for a strategy that `learns_from_repeats`): `route(event)`'s
        `reinforce`. A strategy may compute it without routing the whole page (a 208 answer
        carries no page) as long as it equals that."""
        return self.route(event).reinforce

    def link_payload(self, event: FetchEvent, outdegree: int) -> tuple[float, float]:
        """What every Link of this event carries; (0, 0) unless the strategy says more."""
        return 0.0, 0.0

    @abstractmethod
    def apply(
        self, key: str, state: S | None, message: Message, clock: CrawlClock
    ) -> tuple[S | None, Changes | None]:
        """`key`'s new state and frontier changes after `message`: pure, no I/O."""

    def apply_batch(
        self, key: str, state: S | None, messages: Iterable[tuple[CrawlClock, Message]]
    ) -> tuple[S | None, list[Changes]]:
        """`key`'s state after its (clock, message)s in order, and the changes they emit.

        Every engine applies a key's messages through this (the step core's
        `apply_messages`). The default is `apply` message by message; a strategy may fold a
        batch faster as long as its result equals that fold after `keep_latest` (changes it
        knows a later one replaces may be left out, and need not be built at all).
        """
        out: list[Changes] = []
        apply = self.apply
        for clock, message in messages:
            state, changes = apply(key, state, message, clock)
            if changes is not None:
                out.append(changes)
        return state, out

    def apply_keys(
        self,
        batches: Mapping[str, Sequence[Queued]],
        states: dict[str, S | None],
    ) -> list[Changes]:
        """Every key's batch of (clock, message)s applied in order, as `apply_batch` would
        (an `Inlink` as the Link to its key, `as_messages`): each key's new state replaces
        its entry in `states` (which holds every key of `batches`), and the changes come
        back key after key.

        The step core's `apply_pending` calls this for a step's keys (every engine), so a
        strategy may fold many keys in one loop, with what is set up per call done once per
        step rather than once per key, as long as its result equals `apply_batch` per key.
        """
        out: list[Changes] = []
        apply_batch = self.apply_batch
        for key, batch in batches.items():
            states[key], changes = apply_batch(key, states[key], as_messages(key, batch))
            out += changes
        return out

    @abstractmethod
    def encode_state(self, state: S) -> bytes: ...

    def encode_states(self, states: Collection[S]) -> Iterable[bytes]:
        """`encode_state` of each of `states`, in order: a step writes its changed states
        at once (a strategy whose encoding is one `struct` layout does it in one C pass)."""
        return map(self.encode_state, states)

    @abstractmethod
    def decode_state(self, data: bytes) -> S: ...


class GlobalStrategy(Strategy[S]):
    """A strategy that also recomputes over all its state every `interval` crawled pages.

    Batch and partial PageRank are such strategies: the engine commits the step, then
    hands `recompute` a snapshot of every key's state and applies what it returns. Beam
    has no per-key form of this and refuses them.
    """

    interval: int

    @abstractmethod
    def recompute(
        self, states: Iterable[tuple[str, S]], clock: CrawlClock
    ) -> tuple[dict[str, S], list[FrontierChange]]: ...


def as_messages(key: str, batch: Iterable[Queued]) -> Iterator[tuple[CrawlClock, Message]]:
    """`key`'s queued (clock, message)s with each `Inlink` as the Link to `key`."""
    for clock, message in batch:
        yield (clock, message.link(key)) if isinstance(message, Inlink) else (clock, message)


def as_changes(changes: Changes | None) -> tuple[FrontierChange, ...]:
    """An `apply` result as a tuple of changes."""
    if changes is None:
        return ()
    if isinstance(changes, tuple):
        return changes
    return (changes,)


def links_to(
    children: Iterable[str], parent: str, crawl_id: str, cycle: int, value: float, weight: float
) -> tuple[Link, ...]:
    """One `Link` from `parent` to each of `children`, all with the same payload.

    Built as `tuple.__new__(Link, fields)` mapped over the children, which is what
    `Link(...)` does without its Python-level `__new__`: a page's dozens of links cost
    no Python frame each.
    """
    fields = zip(
        children, repeat(parent), repeat(crawl_id), repeat(cycle), repeat(value), repeat(weight)
    )
    return tuple(map(tuple.__new__, repeat(Link), fields))


def distinct_outlinks(outlinks: Iterable[str]) -> tuple[str, ...]:
    """Outlinks without repeats, first occurrence order kept; O(i) counts these."""
    return tuple(dict.fromkeys(outlinks))
