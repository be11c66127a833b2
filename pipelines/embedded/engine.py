"""The embedded engine: strategy operators over a state store, one atomic commit per step.

A step takes a batch of input items (decoded FetchEvents, or dead letters the source could
not decode), applies the strategy to every keyed message in input order, and commits. The
commit order (see `Engine._commit`) makes a kill -9 at any point harmless: outputs are
flushed first, then state, input position and output position land in one write batch;
on restart the sink is rewound to the committed output position and the input is read
again from the committed input position, so the redone step writes the same bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from frontierflow.connectors.base import DecisionSink, Failed, InputItem, Position, Sink
from frontierflow.pipelines.core.step import (
    LatestChanges,
    apply_messages,
    crawl_clock,
    echo_fill_key,
    is_repeat_fetch,
    keep_latest,
    keyed_messages,
    with_echo_from_state,
)
from frontierflow.pipelines.core.strategy import (
    CrawlClock,
    GlobalStrategy,
    Link,
    Message,
    Strategy,
)
from frontierflow.pipelines.core.validate import Limits, checked
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
    Removal,
    ScalingDecision,
    SeedRequest,
)
from frontierflow.state.cache import HotStates
from frontierflow.state.codec import decode_i32, decode_u64, encode_i32, encode_u64
from frontierflow.state.format import (
    CRAWLED_FAMILY,
    INPUT_POSITION,
    OUTPUT_POSITION,
    SEEDS_POSITION,
    crawled_key,
)
from frontierflow.state.speed import SpeedState, decode_speed_state, encode_speed_state
from frontierflow.state.store import META_FAMILY, StateStore, Transaction, with_meta
from frontierflow.state.urls import is_http_url

log = logging.getLogger(__name__)

S = TypeVar("S")

SPEED_FAMILY = "speed"
"""Engine-owned when the speed controller runs: fetcher id → its windows and controller."""

DEFAULT_HOT_STATES = 262_144
"""Strategy states kept decoded-ready across steps (about 50 MB for IECA's)."""


@dataclass(slots=True)
class EngineStats:
    """Counters since the engine started (not persisted)."""

    events: int = 0
    duplicates: int = 0
    dead_letters: int = 0
    links: int = 0
    entries: int = 0
    removals: int = 0
    recomputations: int = 0
    decisions: int = 0
    speed_skipped: int = 0
    """Valid events the speed statistics could not use (empty fetcher id, ...)."""
    steps: int = 0
    dead_reasons: dict[str, int] = field(default_factory=dict)


class Engine(Generic[S]):
    """Runs one strategy over a store; see the module docstring for the commit protocol."""

    def __init__(
        self,
        strategy: Strategy[S],
        store: StateStore,
        sink: Sink,
        *,
        source_name: str = "input",
        limits: Limits | None = None,
        before_commit: Callable[[str], None] | None = None,
        speed: ControllerSettings | None = None,
        hot_states: int = DEFAULT_HOT_STATES,
        fill_echo: bool = False,
    ) -> None:
        needed = {strategy.family, CRAWLED_FAMILY} | ({SPEED_FAMILY} if speed else set())
        missing = needed - set(store.families)
        if missing:
            raise ValueError(f"store lacks families {sorted(missing)}")
        if speed is not None and not isinstance(sink, DecisionSink):
            raise ValueError("the speed controller needs a sink that takes ScalingDecisions")
        self.speed = speed
        self.fill_echo = fill_echo
        """Whether an event without echo gets the one its strategy derives from state
        (`step.echo_fill_key`): for logs of other crawlers and WARC files."""
        self.strategy = strategy
        self.store = store
        self.sink = sink
        self.source_name = source_name
        self.limits = limits if limits is not None else Limits()
        self.stats = EngineStats()
        self.hot = HotStates(hot_states)
        """Committed strategy states of recently touched keys, kept across steps."""
        self._global: GlobalStrategy[S] | None = (
            strategy if isinstance(strategy, GlobalStrategy) else None
        )
        self._before_commit = before_commit or (lambda _phase: None)
        self.sink.rewind(self.store.get(META_FAMILY, OUTPUT_POSITION))

    @staticmethod
    def families_for(strategy: Strategy[Any], speed: bool = False) -> tuple[str, ...]:
        """The column families a store must have to run `strategy` (and the speed
        controller)."""
        return with_meta((strategy.family, CRAWLED_FAMILY, *((SPEED_FAMILY,) if speed else ())))

    def input_position(self) -> int:
        """For a one-partition source (a file): the index of the first item not yet
        committed (0 on a fresh store)."""
        raw = self.input_checkpoint()
        return 0 if raw is None else decode_u64(raw)  # a one-position token

    def input_checkpoint(self) -> bytes | None:
        """The source's resume token committed with the last step (None: from the start)."""
        return self.store.get(META_FAMILY, INPUT_POSITION)

    def crawled(self, crawl_id: str = "default") -> int:
        """Distinct pages fetched so far in `crawl_id` (the IECA clock)."""
        raw = self.store.get(META_FAMILY, crawled_key(crawl_id))
        return 0 if raw is None else decode_u64(raw)

    def seed(
        self, urls: Iterable[str], crawl_id: str = "default", cycle: int = 0, now_ms: int = 0
    ) -> None:
        """Inject starting pages as one committed step (no input position moves)."""
        step = _Step(self)
        for url in urls:
            if not is_http_url(url, self.limits.max_url_chars):
                raise ValueError(f"seed is not an absolute http(s) URL: {url[:200]!r}")
            step.seed(url, crawl_id, cycle, now_ms)
        self._commit(step, checkpoint=None)

    def seeds_checkpoint(self) -> bytes | None:
        """The seeds source's resume token committed with the last seeds step."""
        return self.store.get(META_FAMILY, SEEDS_POSITION)

    def run_seeds(
        self,
        items: Sequence[tuple[Position, SeedRequest | Failed, bytes]],
        checkpoint: bytes,
        source_name: str = "seeds",
    ) -> None:
        """Seeds read from a source (the live job's seeds topic), applied as `seed` applies
        them and committed as one step with the seeds source's `checkpoint`, so each is
        applied exactly once. Undecodable seeds and bad URLs become dead letters."""
        if not items:
            return
        step = _Step(self)
        for position, item, raw in items:
            if isinstance(item, Failed):
                step.dead(position, item.error_class, item.message, raw, source_name)
            elif not is_http_url(item.url, self.limits.max_url_chars):
                message = f"seed is not an absolute http(s) URL: {item.url[:200]!r}"
                step.dead(position, "InvalidUrl", message, raw, source_name)
            elif item.cycle < 0 or item.requested_at < 0:
                message = f"negative cycle or time in seed {item.url[:200]!r}"
                step.dead(position, "InvalidSeed", message, raw, source_name)
            else:
                step.seed(item.url, item.crawl_id, item.cycle, item.requested_at)
        self._commit(step, checkpoint=None, seeds_checkpoint=checkpoint)

    def close_windows(self) -> None:
        """End of a finished log: close every fetcher's open speed windows (their decisions
        go out) as one committed step. Events that arrive later are late for them."""
        if self.speed is None:
            return
        step = _Step(self)
        step.close_windows(self.speed)
        self._commit(step, checkpoint=None)

    def run_step(self, items: Sequence[InputItem], checkpoint: bytes | None = None) -> None:
        """Apply a batch of input items and commit them as one step, with `checkpoint` as
        the source's resume token (default, for a file: the index after the last item)."""
        if not items:
            return
        if checkpoint is None:
            checkpoint = encode_u64(items[-1][0].offset + 1)  # a one-position token
        step = _Step(self)
        step.prefetch(items)
        limits = self.limits
        for position, item, raw in items:
            event = checked(item, limits)
            if isinstance(event, Failed):
                step.dead(position, event.error_class, event.message, raw)
            else:
                step.event(event)
        self._commit(step, checkpoint)

    def _commit(
        self, step: _Step[S], checkpoint: bytes | None, seeds_checkpoint: bytes | None = None
    ) -> None:
        """Commit one step, in this order:

        1. write the step's frontier changes and dead letters to the sink and flush it;
        2. put the step's states, crawl counters, the next input position and the sink's
           flushed position into the step's transaction;
        3. commit that transaction: one RocksDB write batch.
        A crash before 3 leaves the old positions: the sink is rewound past what 1 wrote
        and the input is read again. A crash after 3 has nothing left to redo.
        """
        step.apply_pending()
        self.sink.write(list(step.changes.values()), step.dead_letters)
        if step.decisions:
            assert isinstance(self.sink, DecisionSink)  # checked in __init__
            self.sink.write_decisions(step.decisions)
        self._before_commit("flushing")
        out_position = self.sink.flush()
        self._before_commit("flushed")
        txn = step.txn
        committed = step.write_states()
        if checkpoint is not None:
            txn.put(META_FAMILY, INPUT_POSITION, checkpoint)
        if seeds_checkpoint is not None:
            txn.put(META_FAMILY, SEEDS_POSITION, seeds_checkpoint)
        txn.put(META_FAMILY, OUTPUT_POSITION, out_position)
        txn.commit()
        self.hot.put_many(committed)
        self._before_commit("committed")
        self.stats.steps += 1
        self.stats.decisions += len(step.decisions)
        for change in step.changes.values():
            if isinstance(change, Removal):
                self.stats.removals += 1
            else:
                self.stats.entries += 1


class _Step(Generic[S]):
    """The working set of one step: decoded states, counters, outputs, one transaction."""

    def __init__(self, engine: Engine[S]) -> None:
        self.engine = engine
        self.strategy = engine.strategy
        self.txn: Transaction = engine.store.transaction()
        self.states: dict[str, S | None] = {}
        self.dirty: set[str] = set()
        self.last_crawled: dict[str, int | None] = {}
        self.crawl_counts: dict[str, int] = {}
        self.pending: dict[str, list[tuple[CrawlClock, Message]]] = {}
        """Messages routed in this step and not applied yet, per key, in input order."""
        self.changes: LatestChanges = {}
        self.dead_letters: list[DeadLetter] = []
        self.speed_states: dict[str, SpeedState | None] = {}
        self.decisions: list[ScalingDecision] = []

    def prefetch(self, items: Sequence[InputItem]) -> None:
        """Read every state the step will touch in two batched reads."""
        keys: dict[str, None] = {}
        pages: dict[str, None] = {}
        links = self.strategy.routes_links
        parents = self.strategy.learns_from_repeats
        for _, item, _ in items:
            if isinstance(item, FetchEvent):
                pages[item.url] = None
                keys[item.url] = None
                if links:
                    keys.update(dict.fromkeys(item.outlinks))
                if parents and item.via is not None:
                    keys[item.via] = None
        self._load_states(list(keys))
        raw = self.txn.get_many(CRAWLED_FAMILY, [u.encode() for u in pages])
        for url, value in zip(pages, raw, strict=True):
            self.last_crawled[url] = None if value is None else decode_i32(value)

    def _load_states(self, keys: list[str]) -> None:
        """Decode the states of `keys` not loaded yet: from the engine's cache of committed
        values where it has them, the rest in one batched read."""
        states, hot, decode = self.states, self.engine.hot, self.strategy.decode_state
        wanted: list[str] = []
        for key in keys:
            if key in states:
                continue
            value = hot.get(key)
            if value is None:
                wanted.append(key)
            else:
                states[key] = decode(value)
        if not wanted:
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
        url = event.url
        if url not in self.last_crawled:
            self._load_crawled(url)
        repeat = is_repeat_fetch(self.last_crawled[url], event.cycle)
        pages_before = self.crawled(event.crawl_id)
        clock = crawl_clock(pages_before, repeat, event.fetched_at)
        messages = keyed_messages(self.strategy, event, repeat)
        if repeat:
            stats.duplicates += 1
        else:
            self.last_crawled[url] = event.cycle
            self.crawl_counts[event.crawl_id] = clock.crawled
            stats.events += 1
        pending = self.pending
        for key, message in messages:
            batch = pending.get(key)
            if batch is None:
                pending[key] = [(clock, message)]
            else:
                batch.append((clock, message))
            if type(message) is Link:
                stats.links += 1
        glob = self.engine._global
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
            self.dirty.add(key)
        return with_echo_from_state(self.strategy, event, self.states[key])

    def observe_speed(self, event: FetchEvent, settings: ControllerSettings) -> None:
        """Every fetch, repeats included, counts in its fetcher's speed windows (seed 003);
        an answer without a download (status 208) does not."""
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
        clock = CrawlClock(self.crawled(crawl_id), now_ms)
        self.apply(url, self.engine.strategy.seed(url, crawl_id, cycle), clock)

    def apply(self, key: str, message: Message, clock: CrawlClock) -> None:
        """Queue `message` for `key`; the step applies each key's queue in one batch."""
        self.pending.setdefault(key, []).append((clock, message))

    def apply_pending(self) -> None:
        """Apply every key's queued messages, in order, as one batch per key (the step
        core's `apply_messages`): each key's state is independent of the others', so
        grouping by key keeps every result and makes one state update per key and step."""
        pending, states = self.pending, self.states
        missing = [key for key in pending if key not in states]
        if missing:
            self._load_states(missing)
        strategy, changes, dirty = self.strategy, self.changes, self.dirty
        for key, batch in pending.items():
            states[key] = apply_messages(strategy, key, states[key], batch, changes)
            dirty.add(key)
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
            self.dirty.add(key)
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

    def write_states(self) -> list[tuple[str, bytes | None]]:
        """Put every state, crawl counter and speed state the step changed into its
        transaction; returns the strategy states written, for the engine's cache."""
        encode = self.strategy.encode_state
        states = self.states
        written = [
            (key, None if (state := states[key]) is None else encode(state)) for key in self.dirty
        ]
        self.txn.put_many(self.strategy.family, ((k.encode(), v) for k, v in written))
        self.txn.put_many(
            CRAWLED_FAMILY,
            (
                (url.encode(), encode_i32(cycle))
                for url, cycle in self.last_crawled.items()
                if cycle is not None
            ),
        )
        for crawl_id, count in self.crawl_counts.items():
            self.txn.put(META_FAMILY, crawled_key(crawl_id), encode_u64(count))
        if self.speed_states:
            self.txn.put_many(
                SPEED_FAMILY,
                (
                    (fetcher_id.encode(), encode_speed_state(state))
                    for fetcher_id, state in self.speed_states.items()
                    if state is not None
                ),
            )
        return written


def apply_all(engine: Engine[Any], items: Iterable[InputItem], step_size: int) -> None:
    """Feed `items` to `engine` in steps of `step_size` items."""
    batch: list[InputItem] = []
    for item in items:
        batch.append(item)
        if len(batch) >= step_size:
            engine.run_step(batch)
            batch = []
    if batch:
        engine.run_step(batch)
