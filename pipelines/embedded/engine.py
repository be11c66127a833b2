"""The embedded engine: strategy operators over a state store, one atomic commit per step
or per interval of steps.

A step takes a batch of input items (decoded FetchEvents, or dead letters the source could
not decode), applies the strategy to every keyed message in input order, and commits. The
commit order (see `Engine._commit`) makes a kill -9 at any point harmless: outputs are
flushed first, then state, input position and output position land in one write batch;
on restart the sink is rewound to the committed output position and the input is read
again from the committed input position, so the redone step writes the same bytes.

With a commit interval of N steps (`commit_every`), every step still flushes its outputs,
but the steps' states and positions go into one transaction that is committed after the
N-th step: a key changed in several of those steps is written to RocksDB once. A crash
then redoes at most N steps, which write the same bytes again; nothing is lost or applied
twice. Reads of later steps see the earlier steps' writes (the transaction's overlay, and
the engine's cache of hot states).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any, Generic, TypeVar

from frontierflow.connectors.base import DecisionSink, Failed, InputItem, Position, Sink
from frontierflow.pipelines.core.collector import collector_paused
from frontierflow.pipelines.core.strategy import (
    GlobalStrategy,
    Strategy,
)
from frontierflow.pipelines.core.validate import Limits, checked
from frontierflow.pipelines.embedded.hosts import hold_paused, paused_groups
from frontierflow.pipelines.embedded.observer import StepObserver, StepReport
from frontierflow.pipelines.embedded.stats import EngineStats
from frontierflow.pipelines.embedded.step import SPEED_FAMILY, Step
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.schemas.records import (
    Removal,
    SeedRequest,
)
from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy
from frontierflow.state.revisit_schedule import REVISITS_FAMILY, RevisitPolicy
from frontierflow.state.storage.cache import HotStates
from frontierflow.state.storage.codec import decode_u64, encode_u64
from frontierflow.state.storage.format import (
    CRAWLED_FAMILY,
    INPUT_POSITION,
    OUTPUT_POSITION,
    SEEDS_POSITION,
    crawled_key,
)
from frontierflow.state.storage.store import META_FAMILY, StateStore, Transaction, with_meta
from frontierflow.state.urls import is_http_url

log = logging.getLogger(__name__)

S = TypeVar("S")


DEFAULT_HOT_STATES = 262_144
"""Strategy states kept decoded-ready across steps (about 50 MB for IECA's)."""

DEFAULT_COMMIT_EVERY = 1
"""Steps per commit of an engine built without saying: each step commits (the live job,
the simulators and the URL Frontier service rely on it). A replay of a log commits every
`pipelines.embedded.replay.REPLAY_COMMIT_EVERY` steps."""


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
        observer: StepObserver | None = None,
        commit_every: int = DEFAULT_COMMIT_EVERY,
        hosts: HostPolicy | None = DEFAULT_POLICY,
        revisit: RevisitPolicy | None = None,
    ) -> None:
        if commit_every < 1:
            raise ValueError(f"commit interval must be >= 1 step, got {commit_every}")
        if revisit is not None and not strategy.revisits_pages:
            raise ValueError(f"{strategy.name} schedules its own revisits: no --revisit")
        needed = set(self.families_for(strategy, speed is not None, revisit is not None))
        missing = needed - set(store.families)
        if missing:
            raise ValueError(f"store lacks families {sorted(missing)}")
        if speed is not None and not isinstance(sink, DecisionSink):
            raise ValueError("the speed controller needs a sink that takes ScalingDecisions")
        self.speed = speed
        self.hosts = hosts
        self.revisit = revisit
        """When pages are asked for again after a download (None: never)."""
        """The frontier's host rule (None: hosts are not tracked, no entry is held)."""
        self.paused: dict[str, int] = {} if hosts is None else paused_groups(store)
        """Queue group key → the end of its pause, for the groups ever paused (committed
        and this step's): their entries go out with `not_before`."""
        self.fill_echo = fill_echo
        """Whether an event without echo gets the one its strategy derives from state
        (`step.echo_fill_key`): for logs of other crawlers and WARC files."""
        self.strategy = strategy
        self.store = store
        self.sink = sink
        self.source_name = source_name
        self.limits = limits if limits is not None else Limits()
        self.stats = EngineStats()
        self.hot: HotStates[Any] = HotStates(
            hot_states, complete=next(store.items(strategy.family), None) is None
        )
        """Committed strategy states of recently touched keys, kept across steps; on a
        store that had none of the strategy's states, all of them until it first drops
        some (`HotStates.complete`)."""
        self._global: GlobalStrategy[S] | None = (
            strategy if isinstance(strategy, GlobalStrategy) else None
        )
        self.commit_every = 1 if self._global is not None else commit_every
        """Steps per committed write batch. A global strategy commits every step: its
        recomputation reads every state from the store."""
        self._txn: Transaction | None = None
        """The transaction of the steps not committed yet (None: all are committed)."""
        self._uncommitted = 0
        self._cache_ahead = False
        """Whether the cache holds writes of steps not committed yet."""
        self._reports: list[StepReport] = []
        self._last_started: float | None = None
        """What the observer is told of the uncommitted steps once they are committed."""
        self._before_commit = before_commit or (lambda _phase: None)
        self.observer = observer
        """Told of every committed step (an operator's page); None: nothing is built."""
        self.sink.rewind(self.store.get(META_FAMILY, OUTPUT_POSITION))

    @staticmethod
    def families_for(
        strategy: Strategy[Any], speed: bool = False, revisit: bool = False
    ) -> tuple[str, ...]:
        """The column families a store must have to run `strategy` (and the speed
        controller, and scheduled revisits)."""
        extra = (*((SPEED_FAMILY,) if speed else ()), *((REVISITS_FAMILY,) if revisit else ()))
        return with_meta((strategy.family, CRAWLED_FAMILY, *extra))

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
        key = crawled_key(crawl_id)
        raw = (
            self.store.get(META_FAMILY, key)
            if self._txn is None
            else self._txn.get(META_FAMILY, key)
        )
        return 0 if raw is None else decode_u64(raw)

    @property
    def global_strategy(self) -> GlobalStrategy[S] | None:
        """The strategy when it also recomputes over all states (PageRank), else None."""
        return self._global

    def transaction(self) -> Transaction:
        """The transaction a step writes into: the one of the steps not yet committed, or a
        new one."""
        if self._txn is None:
            self._txn = self.store.transaction()
        return self._txn

    def seed(
        self, urls: Iterable[str], crawl_id: str = "default", cycle: int = 0, now_ms: int = 0
    ) -> None:
        """Inject starting pages as one committed step (no input position moves)."""
        with self._step_guard():
            step: Step[S] = Step(self)
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
        with self._step_guard():
            step: Step[S] = Step(self)
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
            self.commit_pending()
            return
        self.commit_pending()  # the step reads every fetcher's speed state from the store
        with self._step_guard():
            step: Step[S] = Step(self)
            step.close_windows(self.speed)
            self._commit(step, checkpoint=None)

    def run_step(self, items: Sequence[InputItem], checkpoint: bytes | None = None) -> None:
        """Apply a batch of input items and commit them as one step, with `checkpoint` as
        the source's resume token (default, for a file: the index after the last item)."""
        if not items:
            return
        if checkpoint is None:
            checkpoint = encode_u64(items[-1][0].offset + 1)  # a one-position token
        started = time.perf_counter()
        with self._step_guard(), collector_paused():
            step: Step[S] = Step(self)
            step.prefetch(items)
            limits = self.limits
            for position, item, raw in items:
                event = checked(item, limits)
                if isinstance(event, Failed):
                    step.dead(position, event.error_class, event.message, raw)
                else:
                    step.event(event)
            self._commit(step, checkpoint, started=started, interval=True)
            del step  # its objects go now, not through the collector when it is back

    def _commit(
        self,
        step: Step[S],
        checkpoint: bytes | None,
        seeds_checkpoint: bytes | None = None,
        started: float | None = None,
        interval: bool = False,
    ) -> None:
        """Commit one step, in this order:

        1. write the step's frontier changes and dead letters to the sink and flush it;
        2. put the step's states, crawl counters, the next input position and the sink's
           flushed position into the step's transaction (shared by the steps of a commit
           interval: a later step's values replace an earlier one's);
        3. commit that transaction: one RocksDB write batch (`commit_pending`) — with
           `interval`, only once `commit_every` steps are in it.
        A crash before 3 leaves the old positions: the sink is rewound past what 1 wrote
        (for every step since the last commit) and the input is read again from the last
        committed position. A crash after 3 has nothing left to redo.
        4. tell the observer, if any, what each committed step did.
        """
        step.apply_pending()
        if step.revisits is not None:
            step.revisits.merge(step.changes)
            self.stats.revisits += step.revisits.revisits
        changes = list(step.changes.values())
        if self.hosts is not None:
            changes, held = hold_paused(self.paused, step.pauses, changes)
            self.stats.held += held
        self.sink.write(changes, step.dead_letters)
        if step.decisions:
            assert isinstance(self.sink, DecisionSink)  # checked in __init__
            self.sink.write_decisions(step.decisions)
        self._before_commit("flushing")
        out_position = self.sink.flush()
        self._before_commit("flushed")
        txn = step.txn
        committed, deleted = step.write_states()
        if checkpoint is not None:
            txn.put(META_FAMILY, INPUT_POSITION, checkpoint)
        if seeds_checkpoint is not None:
            txn.put(META_FAMILY, SEEDS_POSITION, seeds_checkpoint)
        txn.put(META_FAMILY, OUTPUT_POSITION, out_position)
        self.hot.put_many(committed, deleted)  # dropped whole if the commit fails
        self._cache_ahead = True
        self.stats.steps += 1
        self.stats.decisions += len(step.decisions)
        removals = sum(map(Removal.__instancecheck__, changes))
        self.stats.removals += removals
        self.stats.entries += len(changes) - removals
        if self.observer is not None:
            stats = self.stats
            self._reports.append(
                StepReport(
                    changes=changes,
                    dead_letters=step.dead_letters,
                    decisions=step.decisions,
                    similarities=step.similarities or (),
                    stats=replace(stats, dead_reasons=dict(stats.dead_reasons)),
                    seconds=0.0 if started is None else time.perf_counter() - started,
                    hosts={k: v for k, v in step.hosts.items() if v is not None},
                )
            )
        self._last_started = started
        self._uncommitted += 1
        if not interval or self._uncommitted >= self.commit_every:
            self.commit_pending()

    def commit_pending(self) -> None:
        """Commit the steps applied since the last commit in one write batch (nothing when
        there are none), then tell the observer of each. A failed commit drops the cache of
        hot states (it holds those steps' writes) and raises: the steps are redone from the
        last committed position when the job starts again."""
        txn = self._txn
        if txn is None:
            return
        reports, self._reports = self._reports, []
        self._txn, self._uncommitted = None, 0
        try:
            txn.commit()
        except BaseException:
            self.hot.clear()
            self._cache_ahead = False
            raise
        self._cache_ahead = False
        self._before_commit("committed")
        self.stats.commits += 1
        if self.observer is None:
            return
        if reports and self._last_started is not None:  # the committing step: to its commit
            reports[-1] = replace(reports[-1], seconds=time.perf_counter() - self._last_started)
        for report in reports:
            try:
                self.observer.step_committed(report)
            except Exception:  # an onlooker's fault must not stop the crawl; the step is in
                log.exception("the step observer failed; the job goes on")

    @contextlib.contextmanager
    def _step_guard(self) -> Iterator[None]:
        """A step that fails before its commit takes the steps not yet committed with it,
        as a crash would: their transaction is dropped and, if the cache holds their
        writes, the cache too. The caller goes on from the last committed position."""
        try:
            yield
        except BaseException:
            txn, self._txn = self._txn, None
            if txn is not None:
                txn.abort()
                self._uncommitted = 0
                self._reports = []
            if self._cache_ahead:
                self.hot.clear()
                self._cache_ahead = False
            raise


COLLECT_EVERY_STEPS = 64
"""Steps between two full runs of the cyclic collector in a loop of steps."""


class StepCollector:
    """Python's cyclic garbage collector for a loop of steps (a replay of a log): off
    while the loop reads its input and runs its steps, one full collection every
    `every` steps, and as it was when the loop ends.

    Between steps the collector, left on, still ran its young-generation passes over each
    step's survivors while the next batch was read, and now and then a full pass over
    everything the process holds; together ~5% of IECA's time on `frontierflow bench`,
    for almost nothing collected (the engine makes no reference cycles). Cyclic garbage
    of other code in the process (a client library's) waits at most `every` steps.
    """

    def __init__(self, every: int = COLLECT_EVERY_STEPS) -> None:
        if every < 1:
            raise ValueError(f"collection interval must be >= 1 step, got {every}")
        self.every = every
        self.steps = 0
        self._was_enabled = False

    def __enter__(self) -> StepCollector:
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def step_done(self) -> None:
        """Count a step; every `every` steps, collect everything."""
        self.steps += 1
        if self.steps % self.every == 0:
            gc.collect()

    def __exit__(self, *exc: object) -> None:
        if self._was_enabled:
            gc.enable()


def apply_all(engine: Engine[Any], items: Iterable[InputItem], step_size: int) -> None:
    """Feed `items` to `engine` in steps of `step_size` items, and commit the last ones."""
    batch: list[InputItem] = []
    with StepCollector() as collector:
        for item in items:
            batch.append(item)
            if len(batch) >= step_size:
                engine.run_step(batch)
                batch = []
                collector.step_done()
        if batch:
            engine.run_step(batch)
        engine.commit_pending()
