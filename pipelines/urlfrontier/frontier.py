"""The frontier a URL Frontier client sees, kept by an embedded engine over RocksDB.

A `Frontier` owns one `Engine` (a strategy, its RocksDB state) and the service's own
records (`state/urlfrontier.py`) in the same store. What a client puts becomes engine
steps: a discovered URL with no parent waiting becomes a seed (`Engine.seed`); a discovered
URL naming its parent (StormCrawler's `url.path`) waits in the parent's pending outlinks;
a known (fetched) URL becomes one FetchEvent whose outlinks are that pending group
(`Engine.run_step`). The service records a step changes ride in the step's own
transaction (`_TxnTap`), and the strategy's frontier changes are written into it by the
step's sink (`_RecordSink`), so a kill -9 keeps a whole step — records, strategy state,
crawl counters — or none of it; an item is acknowledged only after its step committed.

In memory, rebuilt from the records on start: per crawl and queue the URLs' priorities in
a heap, the URLs in flight (locked until `delay_requestable` passes; locks are not kept
across a restart), and when each queue last served. One lock serialises every call.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, NamedTuple

from frontierflow.connectors.base import Failed, Position, Sink
from frontierflow.connectors.urlfrontier.convert import (
    ItemLimits,
    ItemProblem,
    PutItem,
    fetch_event,
    parent_of,
)
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.core.validate import Limits, checked
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.schemas.records import DeadLetter, FetchEvent, FrontierChange, FrontierEntry
from frontierflow.state.store import META_FAMILY, StateStore, Transaction
from frontierflow.state.urlfrontier import (
    FAMILIES,
    PENDING_FAMILY,
    QUEUES_FAMILY,
    URLS_FAMILY,
    PendingOutlinks,
    QueueSettings,
    UrlRecord,
    UrlStatus,
    crawl_key,
    decode_pending,
    decode_queue_settings,
    decode_url_record,
    encode_pending,
    encode_queue_settings,
    encode_url_record,
    split_crawl_key,
)

log = logging.getLogger(__name__)

Op = tuple[str, bytes, bytes | None]
"""(family, key, value) to write with a step; None deletes."""


@dataclass(frozen=True, slots=True)
class FrontierSettings:
    """How the service schedules; validated once."""

    default_lock_s: int = 30
    """How long a URL sent by GetURLs stays locked when the client asks for 0."""
    outlink_timeout_s: float = 60.0
    """How long discovered URLs wait for their parent's report before they are seeded."""
    node: str = "127.0.0.1:0"
    """What ListNodes answers: this server's address."""
    items: ItemLimits = field(default_factory=ItemLimits)
    events: Limits = field(default_factory=Limits)

    def __post_init__(self) -> None:
        if self.default_lock_s < 1:
            raise ValueError("the default lock must be >= 1 s")
        if self.outlink_timeout_s <= 0:
            raise ValueError("the outlink time-out must be > 0")


class Outcome(NamedTuple):
    """What became of one put item: accepted, or refused with a reason."""

    ok: bool
    reason: str = ""


OK = Outcome(True)


class _Slot(NamedTuple):
    """What the scheduler needs of a URL record."""

    priority: float | None
    status: UrlStatus
    refetch_at: int
    created: int


@dataclass(slots=True)
class _Queue:
    slots: dict[str, _Slot] = field(default_factory=dict)
    heap: list[tuple[float, int, str]] = field(default_factory=list)
    inflight: dict[str, float] = field(default_factory=dict)
    """URL → second until which it is locked."""
    last_served: float = float("-inf")
    fetched: int = 0
    """URLs reported fetched (DONE or REVISIT), for the crawl limit."""
    done: int = 0
    """URLs that will not be fetched again."""


@dataclass(frozen=True, slots=True)
class Served:
    """A URL handed out by GetURLs."""

    crawl_id: str
    url: str
    record: UrlRecord


@dataclass(frozen=True, slots=True)
class QueueStats:
    size: int
    in_process: int
    completed: int
    active_queues: int
    queues: int


class Frontier:
    """The service's state and scheduling over an embedded engine; see the module
    docstring. Every public method takes the lock."""

    @staticmethod
    def families_for(strategy: Strategy[Any]) -> tuple[str, ...]:
        """The column families the store must have: the engine's and the service's."""
        return (*Engine.families_for(strategy), *FAMILIES)

    def __init__(
        self,
        strategy: Strategy[Any],
        store: StateStore,
        settings: FrontierSettings | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or FrontierSettings()
        self.clock = clock
        self.lock = threading.RLock()
        self.active = True
        self.store = store
        self._tap = _TxnTap(store)
        self._touched: dict[bytes, None] = {}
        self.unknown_entries = 0
        """Strategy entries for URLs the service does not hold (not served)."""
        self.strategy = strategy
        self._start(strategy)
        self._crawls: dict[str, dict[str, _Queue]] = {}
        self._queue_of: dict[tuple[str, str], str] = {}
        self._queue_settings: dict[tuple[str, str], QueueSettings] = {}
        self._pending_since: dict[tuple[str, str], int] = {}
        self._seq = 0
        self._load()

    def close(self) -> None:
        """Release what the frontier holds besides the store (nothing, embedded)."""

    # ------------------------------------------------------------------ start-up
    def _load(self) -> None:
        orphans: dict[str, list[str]] = {}
        waiting: list[tuple[str, str, str]] = []
        for key, value in self.store.items(URLS_FAMILY):
            crawl_id, url = split_crawl_key(key)
            record = decode_url_record(value)
            self._index(crawl_id, url, record)
            if record.status is UrlStatus.QUEUED and record.priority is None:
                if record.waiting_for is None:
                    orphans.setdefault(crawl_id, []).append(url)
                else:
                    waiting.append((crawl_id, url, record.waiting_for))
        for key, value in self.store.items(QUEUES_FAMILY):
            self._queue_settings[split_crawl_key(key)] = decode_queue_settings(value)
        for key, value in self.store.items(PENDING_FAMILY):
            self._pending_since[split_crawl_key(key)] = decode_pending(value).since_ms
        for crawl_id, url, parent in waiting:
            if (crawl_id, parent) not in self._pending_since:
                orphans.setdefault(crawl_id, []).append(url)
        for crawl_id, urls in orphans.items():
            # a step that created these records committed, the seed step after it did not
            self._seed(crawl_id, urls, [])
        log.info(
            "frontier loaded: %d crawls, %d URLs, %d pending outlink groups",
            len(self._crawls),
            len(self._queue_of),
            len(self._pending_since),
        )

    # ------------------------------------------------------------------ puts
    def put_discovered(self, item: PutItem) -> Outcome:
        """A discovered URL: created unless known; linked from its parent if the parent's
        report is still to come (see the module docstring)."""
        with self.lock:
            now = self.clock()
            key = crawl_key(item.crawl_id, item.url)
            record = self._get(key)
            parent = parent_of(item)
            group: PendingOutlinks | None = None
            if parent is not None and self._takes_outlinks(item.crawl_id, parent, now):
                group = self._pending(item.crawl_id, parent, now)
                if len(group.outlinks) >= self.settings.events.max_outlinks:
                    group = None  # a full page: this one is not one of its links
            ops: list[Op] = []
            if group is not None and item.url not in group.outlinks:
                group = replace(group, outlinks=(*group.outlinks, item.url))
                ops.append(
                    (PENDING_FAMILY, crawl_key(item.crawl_id, parent or ""), encode_pending(group))
                )
            if record is not None:
                if ops:
                    self._write(ops)
                return OK
            record = UrlRecord(
                queue=item.queue,
                metadata=item.metadata,
                created=int(now),
                waiting_for=parent if group is not None else None,
            )
            ops.append((URLS_FAMILY, key, encode_url_record(record)))
            if group is not None:
                self._write(ops)
            else:
                self._seed(item.crawl_id, [item.url], ops)
            return OK

    def put_known(self, item: PutItem, refetchable_from: int) -> Outcome:
        """A fetched URL: its FetchEvent goes through the engine (outlinks: its pending
        group); it is done, or due again from `refetchable_from` as the next cycle."""
        with self.lock:
            now = self.clock()
            key = crawl_key(item.crawl_id, item.url)
            record = self._get(key)
            self._unlock(item.crawl_id, item.url)
            if record is not None and not self._expects_report(record, now):
                # a report repeated (a resend after a lost ack): the fetch counted already
                updated = replace(
                    record,
                    metadata=item.metadata,
                    **_after_report(record, refetchable_from, fresh=False),
                )
                self._write([(URLS_FAMILY, key, encode_url_record(updated))])
                return OK
            if record is None:
                record = UrlRecord(queue=item.queue, created=int(now))
            group_key = crawl_key(item.crawl_id, item.url)
            raw_group = self.store.get(PENDING_FAMILY, group_key)
            outlinks = decode_pending(raw_group).outlinks if raw_group is not None else ()
            try:
                event = fetch_event(item, record, outlinks, int(now * 1000))
            except ItemProblem as exc:
                return Outcome(False, str(exc))
            valid = checked(event, self.settings.events)
            if isinstance(valid, Failed):
                return Outcome(False, valid.message)
            updated = replace(
                record,
                metadata=item.metadata,
                waiting_for=None,
                **_after_report(record, refetchable_from, fresh=True),
            )
            ops: list[Op] = [(URLS_FAMILY, key, encode_url_record(updated))]
            if raw_group is not None:
                ops.append((PENDING_FAMILY, group_key, None))
            children = self._release_children(item.crawl_id, item.url, outlinks, ops)
            self._report(valid, ops)
            self._pending_since.pop((item.crawl_id, item.url), None)
            self._seed_unscored(item.crawl_id, children)
            return OK

    def flush_expired(self) -> int:
        """Seed the outlinks whose parent did not report within the time-out; returns how
        many groups were given up."""
        with self.lock:
            now_ms = int(self.clock() * 1000)
            cutoff = now_ms - int(self.settings.outlink_timeout_s * 1000)
            expired = [k for k, since in self._pending_since.items() if since <= cutoff]
            for crawl_id, parent in expired:
                key = crawl_key(crawl_id, parent)
                raw = self.store.get(PENDING_FAMILY, key)
                outlinks = decode_pending(raw).outlinks if raw is not None else ()
                ops: list[Op] = [(PENDING_FAMILY, key, None)]
                children = self._release_children(crawl_id, parent, outlinks, ops)
                unscored = [u for u in children if self._slot(crawl_id, u, "priority") is None]
                self._seed(crawl_id, unscored, ops)
                self._pending_since.pop((crawl_id, parent), None)
            return len(expired)

    # ------------------------------------------------------------------ serving
    def get_urls(
        self,
        crawls: Sequence[str] | None,
        key: str,
        max_queues: int,
        max_per_queue: int,
        lock_s: int,
    ) -> list[Served]:
        """URLs due for fetching, best queues first (by their best priority), best URLs
        first within a queue; each locked for `lock_s` seconds (0: the default)."""
        with self.lock:
            if not self.active:
                return []
            now = self.clock()
            until = now + (lock_s or self.settings.default_lock_s)
            names = list(self._crawls) if crawls is None else list(crawls)
            heads: list[tuple[float, str, str]] = []
            for crawl_id in names:
                queues = self._crawls.get(crawl_id, {})
                for name in [key] if key else list(queues):
                    queue = queues.get(name)
                    if queue is None:
                        continue
                    self._expire_locks(queue, now)
                    if not self._queue_open(crawl_id, name, queue, now):
                        continue
                    best = self._best(queue, 1, now)
                    if best:
                        heads.append((queue.slots[best[0]].priority or 0.0, crawl_id, name))
            heads.sort(key=lambda h: -h[0])
            if max_queues:
                heads = heads[:max_queues]
            picked: list[tuple[str, str]] = []
            for _, crawl_id, name in heads:
                queue = self._crawls[crawl_id][name]
                urls = self._best(queue, max_per_queue or len(queue.slots), now)
                for url in urls:
                    queue.inflight[url] = until
                queue.last_served = now
                picked += [(crawl_id, url) for url in urls]
            records = self.store.get_many(URLS_FAMILY, [crawl_key(c, u) for c, u in picked])
            return [
                Served(c, u, decode_url_record(raw))
                for (c, u), raw in zip(picked, records, strict=True)
                if raw is not None
            ]

    def release(self, crawl_id: str, url: str) -> None:
        """Unlock a URL that was picked but never reached the client."""
        with self.lock:
            self._unlock(crawl_id, url)

    # ------------------------------------------------------------------ queues and crawls
    def crawls(self) -> list[str]:
        with self.lock:
            return sorted(c for c, queues in self._crawls.items() if queues)

    def queues(self, crawl_id: str, include_inactive: bool) -> list[str]:
        with self.lock:
            now = self.clock()
            out = []
            for name, queue in sorted(self._crawls.get(crawl_id, {}).items()):
                if include_inactive or self._queue_active(crawl_id, name, queue, now):
                    out.append(name)
            return out

    def stats(self, crawl_id: str, key: str) -> QueueStats:
        with self.lock:
            now = self.clock()
            queues = self._crawls.get(crawl_id, {})
            chosen = [(key, queues[key])] if key in queues else [] if key else list(queues.items())
            size = in_process = completed = active = 0
            for _, queue in chosen:
                self._expire_locks(queue, now)
                open_ = sum(1 for s in queue.slots.values() if s.status is not UrlStatus.DONE)
                in_process += len(queue.inflight)
                size += open_ - len(queue.inflight)
                completed += queue.done
                active += 1 if open_ else 0
            return QueueStats(size, in_process, completed, active, len(chosen))

    def delete(self, crawl_id: str, key: str | None) -> int:
        """Remove a crawl (key None) or one of its queues; the URLs removed."""
        with self.lock:
            queues = self._crawls.get(crawl_id, {})
            names = list(queues) if key is None else [key] if key in queues else []
            urls = [u for name in names for u in queues[name].slots]
            removed = set(urls)
            ops: list[Op] = [(URLS_FAMILY, crawl_key(crawl_id, u), None) for u in urls]
            ops += [
                (PENDING_FAMILY, crawl_key(crawl_id, parent), None)
                for (c, parent) in self._pending_since
                if c == crawl_id and (key is None or parent in removed)
            ]
            ops += [
                (QUEUES_FAMILY, crawl_key(crawl_id, name), None)
                for (c, name) in self._queue_settings
                if c == crawl_id and (key is None or name == key)
            ]
            self._write(ops)
            return len(urls)

    def purge(self, crawl_id: str, key: str, days: int) -> int:
        """Remove the URLs created more than `days` days ago."""
        with self.lock:
            cutoff = self.clock() - days * 86_400
            queues = self._crawls.get(crawl_id, {})
            names = [key] if key else list(queues)
            urls = [
                u
                for name in names
                if name in queues
                for u, slot in queues[name].slots.items()
                if slot.created < cutoff
            ]
            self._write([(URLS_FAMILY, crawl_key(crawl_id, u), None) for u in urls])
            return len(urls)

    def set_queue(self, crawl_id: str, key: str, **changes: Any) -> None:
        """Change a queue's settings (the empty key: the crawl's defaults)."""
        with self.lock:
            current = self._queue_settings.get((crawl_id, key), QueueSettings())
            new = replace(current, **changes)
            self._write([(QUEUES_FAMILY, crawl_key(crawl_id, key), encode_queue_settings(new))])

    # ------------------------------------------------------------------ reading URLs
    def url_record(self, crawl_id: str, url: str) -> UrlRecord | None:
        with self.lock:
            return self._get(crawl_key(crawl_id, url))

    def list_urls(self, crawl_id: str, key: str, match: Callable[[str], bool]) -> Iterator[str]:
        """The URLs of a crawl (or one queue) that `match`, in URL order."""
        with self.lock:
            queues = self._crawls.get(crawl_id, {})
            names = [key] if key else list(queues)
            urls = sorted(u for n in names if n in queues for u in queues[n].slots)
        return (u for u in urls if match(u))

    # ------------------------------------------------------------------ internals
    def _get(self, key: bytes) -> UrlRecord | None:
        raw = self.store.get(URLS_FAMILY, key)
        return None if raw is None else decode_url_record(raw)

    def _slot(self, crawl_id: str, url: str, what: str) -> Any:
        queue = self._queue_of.get((crawl_id, url))
        if queue is None:
            return None
        return getattr(self._crawls[crawl_id][queue].slots[url], what)

    def _pending(self, crawl_id: str, parent: str, now: float) -> PendingOutlinks:
        raw = self.store.get(PENDING_FAMILY, crawl_key(crawl_id, parent))
        if raw is None:
            return PendingOutlinks(since_ms=int(now * 1000))
        return decode_pending(raw)

    def _takes_outlinks(self, crawl_id: str, parent: str, now: float) -> bool:
        """Whether outlinks naming `parent` still wait for its report: it is unknown, or
        its report for the cycle it will be fetched in has not come yet."""
        record = self._get(crawl_key(crawl_id, parent))
        return record is None or self._expects_report(record, now)

    def _expects_report(self, record: UrlRecord, now: float) -> bool:
        return record.status is UrlStatus.QUEUED or (
            record.status is UrlStatus.REVISIT and record.refetch_at <= now
        )

    def _release_children(
        self, crawl_id: str, parent: str, outlinks: Iterable[str], ops: list[Op]
    ) -> list[str]:
        """Stop `parent`'s outlinks waiting for it (ops added); the ones that waited."""
        keys = [crawl_key(crawl_id, u) for u in outlinks]
        released = []
        for url, key, raw in zip(
            outlinks, keys, self.store.get_many(URLS_FAMILY, keys), strict=False
        ):
            if raw is None:
                continue
            record = decode_url_record(raw)
            if record.waiting_for == parent:
                ops.append((URLS_FAMILY, key, encode_url_record(replace(record, waiting_for=None))))
                released.append(url)
        return released

    def _seed_unscored(self, crawl_id: str, urls: Sequence[str]) -> None:
        """Seed the URLs the strategy gave no priority (their parent's links did not)."""
        unscored = [u for u in urls if self._slot(crawl_id, u, "priority") is None]
        if unscored:
            self._seed(crawl_id, unscored, [])

    # The three places the strategy comes in: here the embedded engine; `KafkaFrontier`
    # puts a live job on Kafka in its place.
    def _start(self, strategy: Strategy[Any]) -> None:
        """Set up what applies the strategy: an embedded engine over the same store."""
        self.engine = Engine(
            strategy,
            self._tap,
            _RecordSink(self),
            source_name="urlfrontier",
            limits=self.settings.events,
        )

    def _report(self, event: FetchEvent, ops: list[Op]) -> None:
        """Apply a page's FetchEvent, with `ops`, as one committed step."""
        position = Position(None, self.engine.input_position())
        self._step(ops, lambda: self.engine.run_step([(position, event, b"")]))

    def _seed(self, crawl_id: str, urls: Sequence[str], ops: list[Op]) -> None:
        """Seed `urls`, with `ops`, as one committed step."""
        now_ms = int(self.clock() * 1000)
        self._step(ops, lambda: self.engine.seed(urls, crawl_id, 0, now_ms))

    def _step(self, ops: list[Op], run: Callable[[], None]) -> None:
        """Run one engine step with `ops` in its transaction; then refresh the index of
        every record the step wrote."""
        self._touched = {key: None for family, key, _ in ops if family == URLS_FAMILY}
        self._tap.staged = ops
        try:
            run()
        finally:
            self._tap.staged = []
        self._refresh(ops)

    def _write(
        self,
        ops: list[Op],
        changes: Sequence[FrontierChange] = (),
        meta: tuple[bytes, bytes] | None = None,
    ) -> None:
        """Commit `ops`, then the frontier `changes` and a `meta` key, in one write batch
        (no engine step) and refresh the index."""
        self._touched = {key: None for family, key, _ in ops if family == URLS_FAMILY}
        with self.store.transaction() as txn:
            _apply(txn, ops)
            self._on_changes(txn, changes)
            if meta is not None:
                txn.put(META_FAMILY, *meta)
        self._refresh(ops)

    def _refresh(self, ops: list[Op]) -> None:
        touched = list(self._touched)
        self._touched = {}
        for key, raw in zip(touched, self.store.get_many(URLS_FAMILY, touched), strict=True):
            crawl_id, url = split_crawl_key(key)
            self._index(crawl_id, url, None if raw is None else decode_url_record(raw))
        for family, key, value in ops:
            if family == QUEUES_FAMILY:
                name = split_crawl_key(key)
                if value is None:
                    self._queue_settings.pop(name, None)
                else:
                    self._queue_settings[name] = decode_queue_settings(value)
            elif family == PENDING_FAMILY:
                name = split_crawl_key(key)
                if value is None:
                    self._pending_since.pop(name, None)
                else:
                    self._pending_since[name] = decode_pending(value).since_ms

    def _on_changes(self, txn: Transaction, changes: Sequence[FrontierChange]) -> None:
        """The strategy's frontier changes of a step, written into the step's transaction:
        an entry sets its URL's priority, echo, via and cycle. A removal (the URL was
        fetched) changes nothing: the report that caused it set the status."""
        for change in changes:
            if not isinstance(change, FrontierEntry):
                continue
            key = crawl_key(change.crawl_id, change.url)
            raw = txn.get(URLS_FAMILY, key)
            if raw is None:
                self.unknown_entries += 1
                continue
            record = decode_url_record(raw)
            updated = replace(
                record,
                priority=change.priority,
                echo=change.echo,
                via=change.via,
                cycle=max(record.cycle, change.cycle),
                waiting_for=None,
            )
            txn.put(URLS_FAMILY, key, encode_url_record(updated))
            self._touched[key] = None

    def _index(self, crawl_id: str, url: str, record: UrlRecord | None) -> None:
        old = self._queue_of.pop((crawl_id, url), None)
        if old is not None:
            queue = self._crawls[crawl_id][old]
            slot = queue.slots.pop(url)
            queue.fetched -= slot.status is not UrlStatus.QUEUED
            queue.done -= slot.status is UrlStatus.DONE
            if not queue.slots:
                del self._crawls[crawl_id][old]
                if not self._crawls[crawl_id]:
                    del self._crawls[crawl_id]
        if record is None:
            return
        queue = self._crawls.setdefault(crawl_id, {}).setdefault(record.queue, _Queue())
        slot = _Slot(record.priority, record.status, record.refetch_at, record.created)
        queue.slots[url] = slot
        self._queue_of[(crawl_id, url)] = record.queue
        queue.fetched += slot.status is not UrlStatus.QUEUED
        queue.done += slot.status is UrlStatus.DONE
        if slot.priority is not None and slot.status is not UrlStatus.DONE:
            self._seq += 1
            heapq.heappush(queue.heap, (-slot.priority, self._seq, url))

    def _best(self, queue: _Queue, n: int, now: float) -> list[str]:
        """Up to `n` servable URLs of `queue`, best first; stale heap items dropped."""
        out: list[str] = []
        keep: list[tuple[float, int, str]] = []
        seen: set[str] = set()
        heap = queue.heap
        while heap and len(out) < n:
            item = heapq.heappop(heap)
            neg, _, url = item
            slot = queue.slots.get(url)
            if slot is None or slot.priority != -neg or url in seen:
                continue  # stale: the URL left, or its priority changed since
            if slot.status is UrlStatus.DONE or url in queue.inflight:
                continue  # pushed again when its lock ends
            seen.add(url)
            keep.append(item)
            if slot.status is UrlStatus.QUEUED or slot.refetch_at <= now:
                out.append(url)
        for item in keep:
            heapq.heappush(heap, item)
        return out

    def _expire_locks(self, queue: _Queue, now: float) -> None:
        for url, until in list(queue.inflight.items()):
            if until <= now:
                self._unlock_in(queue, url)

    def _unlock(self, crawl_id: str, url: str) -> None:
        name = self._queue_of.get((crawl_id, url))
        if name is not None:
            self._unlock_in(self._crawls[crawl_id][name], url)

    def _unlock_in(self, queue: _Queue, url: str) -> None:
        if queue.inflight.pop(url, None) is None:
            return
        slot = queue.slots.get(url)
        if slot is not None and slot.priority is not None and slot.status is not UrlStatus.DONE:
            self._seq += 1
            heapq.heappush(queue.heap, (-slot.priority, self._seq, url))

    def _settings_of(self, crawl_id: str, name: str) -> tuple[QueueSettings, int]:
        settings = self._queue_settings.get((crawl_id, name), QueueSettings())
        default = self._queue_settings.get((crawl_id, ""), QueueSettings())
        delay = settings.delay if settings.delay is not None else (default.delay or 0)
        return settings, delay

    def _queue_open(self, crawl_id: str, name: str, queue: _Queue, now: float) -> bool:
        """Whether the queue may serve now: not blocked, its delay since it last served
        passed, its crawl limit not reached."""
        settings, delay = self._settings_of(crawl_id, name)
        if settings.blocked_until > now or now < queue.last_served + delay:
            return False
        return not (settings.crawl_limit and queue.fetched >= settings.crawl_limit)

    def _queue_active(self, crawl_id: str, name: str, queue: _Queue, now: float) -> bool:
        """Active: holds URLs not completed and is not blocked (due or not)."""
        settings, _ = self._settings_of(crawl_id, name)
        if settings.blocked_until > now:
            return False
        return any(s.status is not UrlStatus.DONE for s in queue.slots.values())


def _after_report(record: UrlRecord, refetchable_from: int, fresh: bool) -> dict[str, Any]:
    """Status fields after a report: done, or a revisit from that date as the next cycle.
    A `fresh` report is the fetch of `record.cycle`; a repeated one of a REVISIT record
    (its cycle already the next one) keeps the cycle."""
    if refetchable_from > 0:
        stays = not fresh and record.status is UrlStatus.REVISIT
        next_cycle = record.cycle if stays else record.cycle + 1
        return {"status": UrlStatus.REVISIT, "refetch_at": refetchable_from, "cycle": next_cycle}
    return {"status": UrlStatus.DONE, "refetch_at": 0}


def _apply(txn: Transaction, ops: Iterable[Op]) -> None:
    for family, key, value in ops:
        if value is None:
            txn.delete(family, key)
        else:
            txn.put(family, key, value)


class _TxnTap:
    """The engine's store, handing the engine transactions that already hold the service's
    writes for the step (`staged`) and remembering the open one (`current`) so the sink
    can add the strategy's changes to the same write batch."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self.families = store.families
        self.staged: list[Op] = []
        self.current: Transaction | None = None

    def transaction(self) -> Transaction:
        txn = self._store.transaction()
        _apply(txn, self.staged)
        self.current = txn
        return txn

    def get(self, family: str, key: bytes) -> bytes | None:
        return self._store.get(family, key)

    def get_many(self, family: str, keys: Sequence[bytes]) -> list[bytes | None]:
        return self._store.get_many(family, keys)

    def items(self, family: str) -> Iterator[tuple[bytes, bytes]]:
        return self._store.items(family)

    def estimate_keys(self, family: str) -> int:
        return self._store.estimate_keys(family)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> _TxnTap:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _RecordSink(Sink):
    """The engine's sink: frontier changes go into the step's transaction as URL records
    (nothing is written outside it, so there is nothing to rewind)."""

    def __init__(self, frontier: Frontier) -> None:
        self.frontier = frontier

    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None:
        txn = self.frontier._tap.current
        if txn is None:
            raise RuntimeError("the sink was written outside an engine step")
        for letter in dead:  # checked before the step: not expected
            log.warning("dead letter %s: %s", letter.error_class, letter.message)
        self.frontier._on_changes(txn, changes)

    def flush(self) -> bytes:
        return b""

    def rewind(self, position: bytes | None) -> None:
        return None
