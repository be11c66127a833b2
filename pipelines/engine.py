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
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from frontierflow.pipelines.speed import (
    ControllerSettings,
    SpeedState,
    decode_speed_state,
    encode_speed_state,
    observe,
    speed_event_problem,
)
from frontierflow.pipelines.speed import flush as close_windows
from frontierflow.pipelines.strategies.base import (
    ALREADY_FETCHED,
    CrawlClock,
    FrontierChange,
    GlobalStrategy,
    Message,
    Strategy,
    as_changes,
    change_key,
    learns_from_repeats,
    repeat_reinforce,
)
from frontierflow.pipelines.urls import is_http_url
from frontierflow.pipelines.validate import InvalidEvent, Limits, validate_event
from frontierflow.schemas.records import DeadLetter, FetchEvent, ScalingDecision
from frontierflow.state.store import META_FAMILY, StateStore, Transaction, with_meta

log = logging.getLogger(__name__)

S = TypeVar("S")

CRAWLED_FAMILY = "crawled"
"""Engine-owned: URL → the last cycle it was fetched in, to count pages and drop repeats."""
SPEED_FAMILY = "speed"
"""Engine-owned when the speed controller runs: fetcher id → its windows and controller."""

INPUT_POSITION = b"input.position"
OUTPUT_POSITION = b"output.position"
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")


@dataclass(frozen=True, slots=True)
class Failed:
    """An input item the source could not decode; it becomes a dead letter."""

    error_class: str
    message: str
    raw: bytes


class Position(NamedTuple):
    """Where an input item came from: a Kafka partition and offset, or (None, record index)
    in a file."""

    partition: int | None
    offset: int


InputItem = tuple[Position, FetchEvent | Failed, bytes]
"""(where in the input, the decoded event or the failure, the raw bytes)."""


class Sink(Protocol):
    """Where frontier changes and dead letters go. Positions are opaque bytes."""

    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None: ...

    def flush(self) -> bytes: ...

    def rewind(self, position: bytes | None) -> None: ...


class DecisionSink(Sink, Protocol):
    """A sink that also takes the speed controller's ScalingDecisions (fetcher-control)."""

    def write_decisions(self, decisions: Sequence[ScalingDecision]) -> None: ...


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
    ) -> None:
        needed = {strategy.family, CRAWLED_FAMILY} | ({SPEED_FAMILY} if speed else set())
        missing = needed - set(store.families)
        if missing:
            raise ValueError(f"store lacks families {sorted(missing)}")
        if speed is not None and not hasattr(sink, "write_decisions"):
            raise ValueError("the speed controller needs a sink that takes ScalingDecisions")
        self.speed = speed
        self.strategy = strategy
        self.store = store
        self.sink = sink
        self.source_name = source_name
        self.limits = limits if limits is not None else Limits()
        self.stats = EngineStats()
        self._global: GlobalStrategy[S] | None = (
            strategy if hasattr(strategy, "recompute") else None  # type: ignore[assignment]
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
        return 0 if raw is None else _U64.unpack(raw)[0]

    def input_checkpoint(self) -> bytes | None:
        """The source's resume token committed with the last step (None: from the start)."""
        return self.store.get(META_FAMILY, INPUT_POSITION)

    def crawled(self, crawl_id: str = "default") -> int:
        """Distinct pages fetched so far in `crawl_id` (the IECA clock)."""
        raw = self.store.get(META_FAMILY, _crawled_key(crawl_id))
        return 0 if raw is None else _U64.unpack(raw)[0]

    def seed(
        self, urls: Iterable[str], crawl_id: str = "default", cycle: int = 0, now_ms: int = 0
    ) -> None:
        """Inject starting pages as one committed step (no input position moves)."""
        step = _Step(self)
        for url in urls:
            if not is_http_url(url, self.limits.max_url_chars):
                raise ValueError(f"seed is not an absolute http(s) URL: {url[:200]!r}")
            clock = CrawlClock(step.crawled(crawl_id), now_ms)
            step.apply(url, self.strategy.seed(url, crawl_id, cycle), clock)
        self._commit(step, checkpoint=None)

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
            checkpoint = _U64.pack(items[-1][0].offset + 1)
        step = _Step(self)
        step.prefetch(items)
        for position, item, raw in items:
            if isinstance(item, Failed):
                step.dead(position, item.error_class, item.message, raw)
                continue
            try:
                event = validate_event(item, self.limits)
            except InvalidEvent as exc:
                step.dead(position, "InvalidEvent", str(exc), raw)
                continue
            step.event(event)
        self._commit(step, checkpoint)

    def _commit(self, step: _Step[S], checkpoint: bytes | None) -> None:
        """Commit one step, in this order:

        1. write the step's frontier changes and dead letters to the sink and flush it;
        2. put the step's states, crawl counters, the next input position and the sink's
           flushed position into the step's transaction;
        3. commit that transaction: one RocksDB write batch.
        A crash before 3 leaves the old positions: the sink is rewound past what 1 wrote
        and the input is read again. A crash after 3 has nothing left to redo.
        """
        self.sink.write(list(step.changes.values()), step.dead_letters)
        if step.decisions:
            self.sink.write_decisions(step.decisions)  # type: ignore[attr-defined]
        self._before_commit("flushing")
        out_position = self.sink.flush()
        self._before_commit("flushed")
        txn = step.txn
        step.write_states()
        if checkpoint is not None:
            txn.put(META_FAMILY, INPUT_POSITION, checkpoint)
        txn.put(META_FAMILY, OUTPUT_POSITION, out_position)
        txn.commit()
        self._before_commit("committed")
        self.stats.steps += 1
        self.stats.decisions += len(step.decisions)
        for change in step.changes.values():
            if hasattr(change, "priority"):
                self.stats.entries += 1
            else:
                self.stats.removals += 1


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
        self.changes: dict[str | tuple[str, str], FrontierChange] = {}
        self.dead_letters: list[DeadLetter] = []
        self.speed_states: dict[str, SpeedState | None] = {}
        self.decisions: list[ScalingDecision] = []

    def prefetch(self, items: Sequence[InputItem]) -> None:
        """Read every state the step will touch in two batched reads."""
        keys: dict[str, None] = {}
        pages: dict[str, None] = {}
        links = getattr(self.strategy, "routes_links", True)
        parents = learns_from_repeats(self.strategy)
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
            self.last_crawled[url] = None if value is None else _I32.unpack(value)[0]

    def _load_states(self, keys: list[str]) -> None:
        wanted = [k for k in keys if k not in self.states]
        if not wanted:
            return
        raw = self.txn.get_many(self.strategy.family, [k.encode() for k in wanted])
        decode = self.strategy.decode_state
        for key, value in zip(wanted, raw, strict=True):
            self.states[key] = None if value is None else decode(value)

    def crawled(self, crawl_id: str) -> int:
        count = self.crawl_counts.get(crawl_id)
        if count is None:
            count = self.engine.crawled(crawl_id)
            self.crawl_counts[crawl_id] = count
        return count

    def event(self, event: FetchEvent) -> None:
        """Apply one valid FetchEvent: count the page, then its Fetched, Reinforce and Link
        messages. A repeat fetch changes nothing, except that a strategy that learns from
        its choices hears that the choice led to a page already fetched."""
        stats = self.engine.stats
        if self.engine.speed is not None and event.status != ALREADY_FETCHED:
            self.observe_speed(event, self.engine.speed)
        url = event.url
        if url not in self.last_crawled:
            self._load_crawled(url)
        if is_repeat_fetch(self.last_crawled[url], event.cycle):
            stats.duplicates += 1
            reinforce = repeat_reinforce(self.strategy, event)
            if reinforce is not None:
                clock = CrawlClock(self.crawled(event.crawl_id), event.fetched_at)
                self.apply(reinforce.parent, reinforce, clock)
            return
        self.last_crawled[url] = event.cycle
        count = self.crawled(event.crawl_id) + 1
        self.crawl_counts[event.crawl_id] = count
        clock = CrawlClock(count, event.fetched_at)
        routed = self.strategy.route(event)
        self.apply(url, routed.fetched, clock)
        if routed.reinforce is not None:
            self.apply(routed.reinforce.parent, routed.reinforce, clock)
        # the hot loop: `apply` inlined; `prefetch` loaded every outlink's state (validation
        # only drops outlinks, so the routed ones are a subset of those prefetched)
        states, dirty, changes = self.states, self.dirty, self.changes
        strategy_apply = self.strategy.apply
        for link in routed.links:
            key = link.child
            state, change = strategy_apply(key, states[key], link, clock)
            states[key] = state
            dirty.add(key)
            if change is not None:
                if isinstance(change, tuple):
                    for one in change:
                        changes[change_key(one)] = one
                else:
                    changes[key] = change
        stats.events += 1
        stats.links += len(routed.links)
        glob = self.engine._global
        if glob is not None and count % glob.interval == 0:
            self.recompute(glob, clock)

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
            state, decisions = close_windows(state, settings)
            self.speed_states[fetcher_id] = state
            self.decisions += decisions

    def _load_crawled(self, url: str) -> None:
        value = self.txn.get(CRAWLED_FAMILY, url.encode())
        self.last_crawled[url] = None if value is None else _I32.unpack(value)[0]

    def apply(self, key: str, message: Message, clock: CrawlClock) -> None:
        if key not in self.states:
            self._load_states([key])
        state, changes = self.strategy.apply(key, self.states[key], message, clock)
        self.states[key] = state
        self.dirty.add(key)
        for change in as_changes(changes):
            self.changes[change_key(change)] = change

    def recompute(self, glob: GlobalStrategy[S], clock: CrawlClock) -> None:
        """A global recomputation over every state, this step's uncommitted ones included."""
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
        for change in changes:
            self.changes[change_key(change)] = change
        self.engine.stats.recomputations += 1

    def dead(self, position: Position, error_class: str, message: str, raw: bytes) -> None:
        letter = DeadLetter(
            source=self.engine.source_name,
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

    def write_states(self) -> None:
        encode = self.strategy.encode_state
        states = self.states
        self.txn.put_many(
            self.strategy.family,
            (
                (key.encode(), None if (state := states[key]) is None else encode(state))
                for key in self.dirty
            ),
        )
        self.txn.put_many(
            CRAWLED_FAMILY,
            (
                (url.encode(), _I32.pack(cycle))
                for url, cycle in self.last_crawled.items()
                if cycle is not None
            ),
        )
        for crawl_id, count in self.crawl_counts.items():
            self.txn.put(META_FAMILY, _crawled_key(crawl_id), _U64.pack(count))
        if self.speed_states:
            self.txn.put_many(
                SPEED_FAMILY,
                (
                    (fetcher_id.encode(), encode_speed_state(state))
                    for fetcher_id, state in self.speed_states.items()
                    if state is not None
                ),
            )


def is_repeat_fetch(last_cycle: int | None, cycle: int) -> bool:
    """A fetch of a page already fetched in this cycle (or a later one) is a repeat: applying
    it again would count the page twice and feed its links twice, so it is skipped."""
    return last_cycle is not None and last_cycle >= cycle


def _crawled_key(crawl_id: str) -> bytes:
    return b"crawled/" + crawl_id.encode()


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
