"""The frontier a URL Frontier client sees, kept by an embedded engine over RocksDB.

A `Frontier` owns one `Engine` (a strategy, its RocksDB state) and the service's own
records (`state/urlfrontier.py`) in the same store. What a client puts becomes engine
steps: a discovered URL with no parent waiting becomes a seed (`Engine.seed`); a discovered
URL naming its parent (StormCrawler's `url.path`) waits in the parent's pending outlinks;
a known (fetched) URL becomes one FetchEvent whose outlinks are that pending group
(`Engine.run_step`). The service records a step changes ride in the step's own
transaction, with the strategy's frontier changes (`records.py`), so a kill -9 keeps a
whole step — records, strategy state, crawl counters — or none of it; an item is
acknowledged only after its step committed.

In memory, rebuilt from the records on start: per crawl and queue the URLs' priorities in
a heap, the URLs in flight, and when each queue last served (`queues.py`). One lock
serialises every call.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

from frontierflow.connectors.base import Failed, Position
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
from frontierflow.pipelines.embedded.hosts import host_store_key
from frontierflow.pipelines.urlfrontier.queues import QueueStats
from frontierflow.pipelines.urlfrontier.records import FrontierRecords, Op, RecordSink
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.hosts import (
    DEFAULT_POLICY,
    HostPolicy,
    answer_updates,
    group_key,
    set_by_client,
)
from frontierflow.state.revisit_schedule import RevisitPolicy
from frontierflow.state.storage.store import META_FAMILY, StateStore
from frontierflow.state.urlfrontier import (
    FAMILIES,
    PENDING_FAMILY,
    URLS_FAMILY,
    PendingOutlinks,
    UrlRecord,
    UrlStatus,
    crawl_key,
    decode_pending,
    decode_url_record,
    encode_pending,
    encode_url_record,
)

log = logging.getLogger(__name__)


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
    hosts: HostPolicy = DEFAULT_POLICY
    """The host rule applied to each queue's reports (`state.hosts`)."""
    revisit: RevisitPolicy | None = None
    """When the engine asks for a reported page again (`--revisit`): its entry's
    `not_before` makes the page a REVISIT from then; None: never."""

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


@dataclass(frozen=True, slots=True)
class Served:
    """A URL handed out by GetURLs."""

    crawl_id: str
    url: str
    record: UrlRecord


class Frontier:
    """The service's state and scheduling over an embedded engine; see the module
    docstring. Every public method takes the lock."""

    @staticmethod
    def families_for(strategy: Strategy[Any], revisit: bool = False) -> tuple[str, ...]:
        """The column families the store must have: the engine's and the service's."""
        return (*Engine.families_for(strategy, revisit=revisit), *FAMILIES)

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
        self.records = FrontierRecords(store)
        self.records.index.policy = self.settings.hosts
        self.strategy = strategy
        self._start(strategy)
        self._load()

    def close(self) -> None:
        """Release what the frontier holds besides the store (nothing, embedded)."""

    # ------------------------------------------------------------------ start-up
    def _load(self) -> None:
        for crawl_id, urls in self.records.load().items():
            # a step that created these records committed, the seed step after it did not
            self._seed(crawl_id, urls, [])
        log.info(
            "frontier loaded: %d crawls, %d URLs, %d pending outlink groups",
            len(self.records.index.crawls),
            len(self.records.index.queue_of),
            len(self.records.pending_since),
        )

    # ------------------------------------------------------------------ puts
    def put_discovered(self, item: PutItem) -> Outcome:
        """A discovered URL: created unless known; linked from its parent if the parent's
        report is still to come (see the module docstring)."""
        with self.lock:
            now = self.clock()
            key = crawl_key(item.crawl_id, item.url)
            record = self.records.get(key)
            parent = parent_of(item)
            group: PendingOutlinks | None = None
            if parent is not None and self._takes_outlinks(item.crawl_id, parent, now):
                group = self.records.pending(item.crawl_id, parent, now)
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
                    self.records.write(ops)
                return OK
            record = UrlRecord(
                queue=item.queue,
                metadata=item.metadata,
                created=int(now),
                waiting_for=parent if group is not None else None,
            )
            ops.append((URLS_FAMILY, key, encode_url_record(record)))
            if group is not None:
                self.records.write(ops)
            else:
                self._seed(item.crawl_id, [item.url], ops)
            return OK

    def put_known(self, item: PutItem, refetchable_from: int) -> Outcome:
        """A fetched URL: its FetchEvent goes through the engine (outlinks: its pending
        group); it is done, or due again from `refetchable_from` as the next cycle."""
        with self.lock:
            now = self.clock()
            key = crawl_key(item.crawl_id, item.url)
            record = self.records.get(key)
            self.records.index.unlock(item.crawl_id, item.url)
            if record is not None and not self._expects_report(record, now):
                # a report repeated (a resend after a lost ack): the fetch counted already
                updated = replace(
                    record,
                    metadata=item.metadata,
                    **_after_report(record, refetchable_from, fresh=False),
                )
                self.records.write([(URLS_FAMILY, key, encode_url_record(updated))])
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
            ops += self._host_ops(valid, record.queue)
            if raw_group is not None:
                ops.append((PENDING_FAMILY, group_key, None))
            children = self.records.release_children(item.crawl_id, item.url, outlinks, ops)
            self._report(valid, ops)
            self.records.pending_since.pop((item.crawl_id, item.url), None)
            self._seed_unscored(item.crawl_id, children)
            return OK

    def flush_expired(self) -> int:
        """Seed the outlinks whose parent did not report within the time-out; returns how
        many groups were given up."""
        with self.lock:
            now_ms = int(self.clock() * 1000)
            cutoff = now_ms - int(self.settings.outlink_timeout_s * 1000)
            expired = [k for k, since in self.records.pending_since.items() if since <= cutoff]
            for crawl_id, parent in expired:
                key = crawl_key(crawl_id, parent)
                raw = self.store.get(PENDING_FAMILY, key)
                outlinks = decode_pending(raw).outlinks if raw is not None else ()
                ops: list[Op] = [(PENDING_FAMILY, key, None)]
                children = self.records.release_children(crawl_id, parent, outlinks, ops)
                unscored = [u for u in children if self.records.index.priority(crawl_id, u) is None]
                self._seed(crawl_id, unscored, ops)
                self.records.pending_since.pop((crawl_id, parent), None)
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
            picked = self.records.index.pick(crawls, key, max_queues, max_per_queue, now, until)
            records = self.store.get_many(URLS_FAMILY, [crawl_key(c, u) for c, u in picked])
            return [
                Served(c, u, decode_url_record(raw))
                for (c, u), raw in zip(picked, records, strict=True)
                if raw is not None
            ]

    def release(self, crawl_id: str, url: str) -> None:
        """Unlock a URL that was picked but never reached the client."""
        with self.lock:
            self.records.index.unlock(crawl_id, url)

    # ------------------------------------------------------------------ queues and crawls
    def crawls(self) -> list[str]:
        with self.lock:
            return self.records.index.crawl_ids()

    def queues(self, crawl_id: str, include_inactive: bool) -> list[str]:
        with self.lock:
            return self.records.index.queue_names(crawl_id, include_inactive, self.clock())

    def stats(self, crawl_id: str, key: str) -> QueueStats:
        with self.lock:
            return self.records.index.stats(crawl_id, key, self.clock())

    def delete(self, crawl_id: str, key: str | None) -> int:
        """Remove a crawl (key None) or one of its queues; the URLs removed."""
        with self.lock:
            queues = self.records.index.queues_of(crawl_id)
            names = list(queues) if key is None else [key] if key in queues else []
            urls = [u for name in names for u in queues[name].slots]
            removed = set(urls)
            ops: list[Op] = [(URLS_FAMILY, crawl_key(crawl_id, u), None) for u in urls]
            ops += [
                (PENDING_FAMILY, crawl_key(crawl_id, parent), None)
                for (c, parent) in self.records.pending_since
                if c == crawl_id and (key is None or parent in removed)
            ]
            prefix = group_key(crawl_id, "")
            ops += [
                (META_FAMILY, host_store_key(name), None)
                for name in self.records.index.hosts
                if (name.startswith(prefix) if key is None else name == group_key(crawl_id, key))
            ]
            self.records.write(ops)
            return len(urls)

    def purge(self, crawl_id: str, key: str, days: int) -> int:
        """Remove the URLs created more than `days` days ago."""
        with self.lock:
            cutoff = self.clock() - days * 86_400
            queues = self.records.index.queues_of(crawl_id)
            names = [key] if key else list(queues)
            urls = [
                u
                for name in names
                if name in queues
                for u, slot in queues[name].slots.items()
                if slot.created < cutoff
            ]
            self.records.write([(URLS_FAMILY, crawl_key(crawl_id, u), None) for u in urls])
            return len(urls)

    def set_queue(
        self,
        crawl_id: str,
        key: str,
        blocked_until_s: int | None = None,
        delay_s: int | None = None,
        crawl_limit: int | None = None,
    ) -> None:
        """A client's word on a queue, written to its host state (`state.hosts.set_by_client`;
        the empty key holds the crawl's default delay): blocked until an epoch second (0:
        not), a delay between servings, a page limit per cycle (0: the policy's)."""
        with self.lock:
            gkey = group_key(crawl_id, key)
            state = set_by_client(
                self.records.index.hosts.get(gkey),
                blocked_until_ms=None if blocked_until_s is None else blocked_until_s * 1000,
                delay_ms=None if delay_s is None else delay_s * 1000,
                page_limit=crawl_limit,
            )
            self.records.write([self.records.host_op(gkey, state)])

    # ------------------------------------------------------------------ reading URLs
    def url_record(self, crawl_id: str, url: str) -> UrlRecord | None:
        with self.lock:
            return self.records.get(crawl_key(crawl_id, url))

    def list_urls(self, crawl_id: str, key: str, match: Callable[[str], bool]) -> Iterator[str]:
        """The URLs of a crawl (or one queue) that `match`, in URL order."""
        with self.lock:
            queues = self.records.index.queues_of(crawl_id)
            names = [key] if key else list(queues)
            urls = sorted(u for n in names if n in queues for u in queues[n].slots)
        return (u for u in urls if match(u))

    # ------------------------------------------------------------------ internals
    def _host_ops(self, event: FetchEvent, queue: str) -> list[Op]:
        """The host rule applied to a report, in the queue's host state (the service's
        unit of politeness is the queue; StormCrawler names queues by host)."""
        hosts = self.records.index.hosts
        updates = answer_updates(hosts.get, event, self.settings.hosts, group=queue)
        return [self.records.host_op(k, state) for k, state in updates]

    def _takes_outlinks(self, crawl_id: str, parent: str, now: float) -> bool:
        """Whether outlinks naming `parent` still wait for its report: it is unknown, or
        its report for the cycle it will be fetched in has not come yet."""
        record = self.records.get(crawl_key(crawl_id, parent))
        return record is None or self._expects_report(record, now)

    def _expects_report(self, record: UrlRecord, now: float) -> bool:
        return record.status is UrlStatus.QUEUED or (
            record.status is UrlStatus.REVISIT and record.refetchable_from() <= now
        )

    def _seed_unscored(self, crawl_id: str, urls: Sequence[str]) -> None:
        """Seed the URLs the strategy gave no priority (their parent's links did not)."""
        unscored = [u for u in urls if self.records.index.priority(crawl_id, u) is None]
        if unscored:
            self._seed(crawl_id, unscored, [])

    # The three places the strategy comes in: here the embedded engine; `KafkaFrontier`
    # puts a live job on Kafka in its place.
    def _start(self, strategy: Strategy[Any]) -> None:
        """Set up what applies the strategy: an embedded engine over the same store."""
        self.engine = Engine(
            strategy,
            self.records.tap,
            RecordSink(self.records),
            source_name="urlfrontier",
            limits=self.settings.events,
            hosts=None,  # the service applies the host rule per queue (`_host_ops`)
            revisit=self.settings.revisit,
        )

    def _report(self, event: FetchEvent, ops: list[Op]) -> None:
        """Apply a page's FetchEvent, with `ops`, as one committed step."""
        position = Position(None, self.engine.input_position())
        self.records.step(ops, lambda: self.engine.run_step([(position, event, b"")]))

    def _seed(self, crawl_id: str, urls: Sequence[str], ops: list[Op]) -> None:
        """Seed `urls`, with `ops`, as one committed step."""
        now_ms = int(self.clock() * 1000)
        self.records.step(ops, lambda: self.engine.seed(urls, crawl_id, 0, now_ms))


def _after_report(record: UrlRecord, refetchable_from: int, fresh: bool) -> dict[str, Any]:
    """Status fields after a report: done, or a revisit from that date as the next cycle.
    A `fresh` report is the fetch of `record.cycle`; a repeated one of a REVISIT record
    (its cycle already the next one) keeps the cycle."""
    if refetchable_from > 0:
        stays = not fresh and record.status is UrlStatus.REVISIT
        next_cycle = record.cycle if stays else record.cycle + 1
        return {"status": UrlStatus.REVISIT, "refetch_at": refetchable_from, "cycle": next_cycle}
    return {"status": UrlStatus.DONE, "refetch_at": 0}
