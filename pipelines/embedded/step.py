"""One step of the embedded engine: the working set between two commits.

A step reads every state its input items will touch in batched reads (the engine's cache of
committed values first), runs each valid FetchEvent through the step core (count, repeat,
route), queues the keyed messages per key and applies each key's queue as one batch at the
end (`apply_pending`), exactly as the Beam forms fold a key's messages. `write_states` puts
what changed into the step's transaction (shared by the steps of a commit interval);
`Engine._commit` (engine.py) commits it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import chain, filterfalse
from typing import Any, Generic, Protocol, TypeVar, cast

from frontierflow.connectors.base import InputItem, Position
from frontierflow.pipelines.core.step import (
    FetchKind,
    LatestChanges,
    apply_messages,
    apply_pending,
    crawl_clock,
    echo_fill_key,
    is_page_answer,
    is_repeat_fetch,
    keep_latest,
    queue_messages,
    seed_message,
    with_echo_from_state,
)
from frontierflow.pipelines.core.strategy import (
    CrawlClock,
    Fetched,
    GlobalStrategy,
    Message,
    Queued,
    Strategy,
)
from frontierflow.pipelines.embedded.hosts import host_store_key
from frontierflow.pipelines.embedded.observer import StepObserver
from frontierflow.pipelines.embedded.revisits import StepRevisits
from frontierflow.pipelines.embedded.stats import EngineStats
from frontierflow.pipelines.speed.per_fetcher import (
    counts_for_speed,
    flush,
    observe,
    speed_event_problem,
)
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    ScalingDecision,
)
from frontierflow.state.host_pauses import Pause, answer_and_pause
from frontierflow.state.hosts import (
    HostPolicy,
    HostState,
    decode_host_state,
    encode_host_state,
    group_key,
)
from frontierflow.state.revisit_schedule import RevisitPolicy
from frontierflow.state.speed import SpeedState, decode_speed_state, encode_speed_state
from frontierflow.state.storage.cache import HotStates
from frontierflow.state.storage.codec import decode_i32, encode_i32, encode_u64
from frontierflow.state.storage.format import (
    CRAWLED_FAMILY,
    crawled_key,
)
from frontierflow.state.storage.store import META_FAMILY, StateStore, Transaction

S = TypeVar("S")


class StepEngine(Protocol):
    """What a step reads of the engine that runs it (`engine.Engine`, which sits above the
    step and hands itself in)."""

    strategy: Strategy[Any]
    store: StateStore
    stats: EngineStats
    hosts: HostPolicy | None
    revisit: RevisitPolicy | None
    speed: ControllerSettings | None
    fill_echo: bool
    hot: HotStates[Any]
    source_name: str
    observer: StepObserver | None

    @property
    def global_strategy(self) -> GlobalStrategy[Any] | None: ...

    def crawled(self, crawl_id: str = "default") -> int: ...

    def transaction(self) -> Transaction: ...


SPEED_FAMILY = "speed"
"""Engine-owned when the speed controller runs: fetcher id → its windows and controller."""


class Step(Generic[S]):
    """The working set of one step: decoded states, counters, outputs, one transaction."""

    def __init__(self, engine: StepEngine) -> None:
        self.engine = engine
        self.strategy: Strategy[S] = engine.strategy
        self.txn: Transaction = engine.transaction()
        self.states: dict[str, S | None] = {}
        self.dirty: dict[str, None] = {}
        """The keys whose state the step changed, in the order first changed (a dict: the
        write path then reads the states in the order they were made, not a set's)."""
        self.last_crawled: dict[str, int | None] = {}
        """The cycle each page of the step was last fetched in, as read, then as counted."""
        self.crawl_counts: dict[str, int] = {}
        self.first_fetches: dict[str, int] = {}
        self.counts_moved: set[str] = set()
        """The pages the step fetched first (→ their cycle) and the crawls it counted them
        in: what it writes of `last_crawled` and `crawl_counts` (a step of repeats, such
        as 208 answers, writes neither)."""
        self.pending: defaultdict[str, list[Queued]] = defaultdict(list)
        """Messages routed in this step and not applied yet, per key, in input order (a
        page's Links as one shared `Inlink`: `queue_messages`)."""
        self.changes: LatestChanges = {}
        self.dead_letters: list[DeadLetter] = []
        self.speed_states: dict[str, SpeedState | None] = {}
        self.decisions: list[ScalingDecision] = []
        self.hosts: dict[str, HostState | None] = {}
        """Queue groups (and registered domains) the step's events told of, by state key."""
        self.pauses: dict[str, list[Pause]] = {}
        """The pauses the step's answers began, by queue group key (`state.host_pauses.Pause`)."""
        self.similarities: list[float] | None = (
            [] if engine.observer is not None and engine.strategy.judges_pages else None
        )
        """Topic similarities of the pages first fetched in this step, for an observer;
        None when nobody watches or the strategy judges no page."""
        policy = engine.revisit
        self.revisits = (
            None if policy is None else StepRevisits(policy, self.strategy.name, self.txn)
        )
        """The step's scheduled revisits (`--revisit`); None when the engine schedules none."""

    def prefetch(self, items: Sequence[InputItem]) -> None:
        """Read every state the step will touch in two batched reads."""
        touched: list[tuple[str, ...]] = []  # each event's keys, in order: one pass below
        pages: dict[str, None] = {}
        links = self.strategy.routes_links
        parents = self.strategy.learns_from_repeats
        for _, item, _ in items:
            if isinstance(item, FetchEvent):
                pages[item.url] = None
                touched.append((item.url,))
                if links:
                    touched.append(item.outlinks)
                if parents and item.via is not None:
                    touched.append((item.via,))
        self._load_states(list(dict.fromkeys(chain.from_iterable(touched))))
        raw = self.txn.get_many(CRAWLED_FAMILY, [u.encode() for u in pages])
        for url, value in zip(pages, raw, strict=True):
            self.last_crawled[url] = None if value is None else decode_i32(value)
        if self.revisits is not None:
            self.revisits.load(list(pages))

    def _load_states(self, keys: list[str]) -> None:
        """Load the states of `keys` not loaded yet: from the engine's cache of committed
        values where it has them (decoded states, or bytes to decode for a strategy that
        changes states in place), the rest in one batched read (none while the cache holds
        every key of the family: `HotStates.complete`)."""
        states, decode = self.states, self.strategy.decode_state
        if states:
            keys = [key for key in keys if key not in states]
        hot = self.engine.hot
        found, wanted = hot.get_many(keys)
        if self.strategy.immutable_states:
            if states:
                states.update(found)
            else:  # the step's first load: the cache's answer is a new dict, taken as is
                self.states = states = found
        else:
            states.update((key, decode(value)) for key, value in found.items())
        if not wanted:
            return
        if hot.complete:  # the cache has every key of the family: these have no state
            states.update(dict.fromkeys(wanted))
            return
        raw = self.txn.get_many(self.strategy.family, [k.encode() for k in wanted])
        for key, value in zip(wanted, raw, strict=True):
            states[key] = None if value is None else decode(value)

    def crawled(self, crawl_id: str) -> int:
        count = self.crawl_counts.get(crawl_id)
        if count is None:
            count = self.engine.crawled(crawl_id)
            self.crawl_counts[crawl_id] = count
        return count

    def event(self, event: FetchEvent) -> None:
        """Apply one valid FetchEvent through the step core: count it (or find it a
        repeat), then apply the keyed messages it routes to, in order."""
        stats = self.engine.stats
        if self.engine.fill_echo:
            fill_key = echo_fill_key(self.strategy, event)
            if fill_key is not None:  # no echo: derived from the state at fetch time
                event = self.with_echo(fill_key, event)
        if self.engine.speed is not None and counts_for_speed(event):
            self.observe_speed(event, self.engine.speed)
        if self.engine.hosts is not None:
            self.observe_host(event)
        if not is_page_answer(event):  # the host's answer: its page stays in the frontier
            stats.deferred += 1
            return
        url = event.url
        if url not in self.last_crawled:
            self._load_crawled(url)
        last = self.last_crawled[url]
        if self.revisits is not None:
            kind = self.revisits.answer(last, event)
        else:
            kind = FetchKind.REPEAT if is_repeat_fetch(last, event.cycle) else FetchKind.FIRST
        repeat = kind is not FetchKind.FIRST  # only a first fetch counts
        pages_before = self.crawled(event.crawl_id)
        clock = crawl_clock(pages_before, repeat, event.fetched_at)
        routed = queue_messages(self.strategy, event, kind is FetchKind.REPEAT, clock, self.pending)
        if routed is None:
            stats.duplicates += 1
        else:
            if not repeat:
                self.last_crawled[url] = event.cycle
                self.crawl_counts[event.crawl_id] = clock.crawled
                self.first_fetches[url] = event.cycle
                self.counts_moved.add(event.crawl_id)
            stats.events += 1
            if routed.inlink is not None:
                stats.links += len(routed.children)
            if self.similarities is not None and isinstance(routed.fetched, Fetched):
                self.similarities.append(routed.fetched.value)
        glob = self.engine.global_strategy
        if not repeat and glob is not None and clock.crawled % glob.interval == 0:
            self.recompute(glob, clock)

    def with_echo(self, key: str, event: FetchEvent) -> FetchEvent:
        """`event` with its echo derived from `key`'s state as it stands in this step: the
        messages queued for `key` by earlier events are applied first."""
        if key not in self.states:
            self._load_states([key])
        queued = self.pending.pop(key, None)
        if queued is not None:
            self.states[key] = apply_messages(
                self.strategy, key, self.states[key], queued, self.changes
            )
            self.dirty[key] = None
        return with_echo_from_state(self.strategy, event, self.states[key])

    def observe_host(self, event: FetchEvent) -> None:
        """The frontier's host rule applied to the event's queue group (and its registered
        domain's page count): `state.hosts.answer_updates`, as the fetchers apply it, and
        the pause it began (`state.host_pauses.answer_and_pause`)."""
        policy = self.engine.hosts
        assert policy is not None
        updates, pause = answer_and_pause(self.host_state, event, policy)
        for key, state in updates:
            before = self.host_state(key)
            if state.pauses > (0 if before is None else before.pauses):
                self.engine.stats.pauses += 1
            self.hosts[key] = state
        if pause is not None:
            key = group_key(event.crawl_id, event.host)
            self.pauses.setdefault(key, []).append(pause)

    def host_state(self, key: str) -> HostState | None:
        if key not in self.hosts:
            raw = self.txn.get(META_FAMILY, host_store_key(key))
            self.hosts[key] = None if raw is None else decode_host_state(raw)
        return self.hosts[key]

    def observe_speed(self, event: FetchEvent, settings: ControllerSettings) -> None:
        """Every fetch, repeats included, counts in its fetcher's speed windows (Nandy,
        Sarkar & Das 2012 count pages downloaded); an answer without a download (status 208)
        does not."""
        if speed_event_problem(event) is not None:
            self.engine.stats.speed_skipped += 1
            return
        state, decisions = observe(self.speed_state(event.fetcher_id), event, settings)
        self.speed_states[event.fetcher_id] = state
        self.decisions += decisions

    def speed_state(self, fetcher_id: str) -> SpeedState | None:
        if fetcher_id not in self.speed_states:
            raw = self.txn.get(SPEED_FAMILY, fetcher_id.encode())
            self.speed_states[fetcher_id] = None if raw is None else decode_speed_state(raw)
        return self.speed_states[fetcher_id]

    def close_windows(self, settings: ControllerSettings) -> None:
        """End of input: every fetcher's open windows close and decide."""
        for key, _ in self.engine.store.items(SPEED_FAMILY):
            fetcher_id = key.decode()
            state = self.speed_state(fetcher_id)
            assert state is not None
            state, decisions = flush(state, settings)
            self.speed_states[fetcher_id] = state
            self.decisions += decisions

    def _load_crawled(self, url: str) -> None:
        value = self.txn.get(CRAWLED_FAMILY, url.encode())
        self.last_crawled[url] = None if value is None else decode_i32(value)

    def seed(self, url: str, crawl_id: str, cycle: int, now_ms: int) -> None:
        """Apply the strategy's seed message for `url` at event time `now_ms`."""
        key, message, clock = seed_message(
            self.engine.strategy, url, crawl_id, cycle, self.crawled(crawl_id), now_ms
        )
        self.apply(key, message, clock)

    def apply(self, key: str, message: Message, clock: CrawlClock) -> None:
        """Queue `message` for `key`; the step applies each key's queue in one batch."""
        self.pending[key].append((clock, message))

    def apply_pending(self) -> None:
        """Apply every key's queued messages, in order, as one batch per key (the step
        core's `apply_pending`): each key's state is independent of the others', so
        grouping by key keeps every result and makes one state update per key and step."""
        pending = self.pending
        missing = list(filterfalse(self.states.__contains__, pending))
        if missing:
            self._load_states(missing)  # may make `self.states` anew
        apply_pending(self.strategy, pending, self.states, self.changes)
        if self.dirty:
            self.dirty.update(dict.fromkeys(pending))
        else:
            self.dirty = dict.fromkeys(pending)
        pending.clear()

    def recompute(self, glob: GlobalStrategy[S], clock: CrawlClock) -> None:
        """A global recomputation over every state, this step's uncommitted ones included."""
        self.apply_pending()
        decode = self.strategy.decode_state
        snapshot: dict[str, S] = {
            k.decode(): decode(v) for k, v in self.engine.store.items(self.strategy.family)
        }
        for key in self.dirty:
            state = self.states[key]
            if state is not None:
                snapshot[key] = state
        new_states, changes = glob.recompute(snapshot.items(), clock)
        for key, state in new_states.items():
            self.states[key] = state
            self.dirty[key] = None
        keep_latest(self.changes, tuple(changes))
        self.engine.stats.recomputations += 1

    def dead(
        self,
        position: Position,
        error_class: str,
        message: str,
        raw: bytes,
        source: str | None = None,
    ) -> None:
        letter = DeadLetter(
            source=self.engine.source_name if source is None else source,
            partition=position.partition,
            offset=position.offset,
            error_class=error_class,
            message=message,
            raw=raw,
            at=0,
        )
        self.dead_letters.append(letter)
        stats = self.engine.stats
        stats.dead_letters += 1
        stats.dead_reasons[error_class] = stats.dead_reasons.get(error_class, 0) + 1

    def write_states(self) -> tuple[dict[str, Any], list[str]]:
        """Put every state, crawl counter and speed state the step changed into its
        transaction; returns what the engine's cache keeps of the strategy states written
        (key → the state itself when the strategy never changes one in place, else its
        bytes) and the keys whose state was deleted."""
        dirty, states = self.dirty, self.states
        if len(dirty) == len(states) and None not in states.values():
            written = states  # every state loaded changed (dirty ⊆ states): no copy to make
        else:
            written = dict(zip(dirty, map(states.__getitem__, dirty), strict=True))
        deleted: list[str] = []
        if None in written.values():
            deleted = [key for key, state in written.items() if state is None]
            for key in deleted:
                del written[key]
        kept = cast("dict[str, S]", written)  # no None left
        encoded = list(self.strategy.encode_states(kept.values()))
        family = self.strategy.family
        self.txn.put_many(family, zip(map(str.encode, kept), encoded, strict=True))
        if deleted:
            self.txn.put_many(family, ((key.encode(), None) for key in deleted))
        if self.first_fetches:
            self.txn.put_many(
                CRAWLED_FAMILY,
                ((url.encode(), encode_i32(cycle)) for url, cycle in self.first_fetches.items()),
            )
        for crawl_id in self.counts_moved:
            count = self.crawl_counts[crawl_id]
            self.txn.put(META_FAMILY, crawled_key(crawl_id), encode_u64(count))
        if self.hosts:
            self.txn.put_many(
                META_FAMILY,
                (
                    (host_store_key(key), encode_host_state(state))
                    for key, state in self.hosts.items()
                    if state is not None
                ),
            )
        if self.revisits is not None:
            self.revisits.write()
        if self.speed_states:
            self.txn.put_many(
                SPEED_FAMILY,
                (
                    (fetcher_id.encode(), encode_speed_state(state))
                    for fetcher_id, state in self.speed_states.items()
                    if state is not None
                ),
            )
        if self.strategy.immutable_states:
            return kept, deleted
        return dict(zip(kept, encoded, strict=True)), deleted
