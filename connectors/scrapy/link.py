"""What Scrapy's scheduler and the FetchEvent middleware share for one crawler: the
frontier queue (the reference fetcher's `HostQueues`, read by its `FrontierReader` in a
thread of its own), the requests handed to Scrapy and not yet answered, and the writer
that publishes the answers (the fetcher's `EventPublisher`), through the Kafka client library
FRONTIERFLOW_KAFKA_CLIENT names.

Rules, the reference fetcher's (`connectors/fetcher/loop.py`):
- nothing is served before the assigned frontier partitions are read to their end;
- the best entry of a host with no request in Scrapy's hands goes first (so one request per
  host at a time; the delay between two is Scrapy's `DOWNLOAD_DELAY` / AutoThrottle, per
  downloader slot);
- a reply request for a page already fetched in its cycle is answered at once with status
  208 and no download; a page fetched is remembered, later plain entries for it dropped;
- each entry handed to Scrapy gets exactly one FetchEvent, its download goes on the
  `fetched` topic, an answered reply request's frontier record is removed;
- the budget counts entries handed to Scrapy; retries of one entry are the same entry;
- an entry held until later (its `not_before`, its host's pause or delay) is handed over
  when that time comes: the link asks the engine for a scheduling round then, rather than
  leave it to the engine's next heartbeat (every 5 s).
Everything here runs on Twisted's reactor thread; the reader thread only hands over.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from scrapy import Request

from frontierflow.connectors.fetcher.events import (
    EventPublisher,
    already_fetched_event,
    outcome_event,
)
from frontierflow.connectors.fetcher.frontier import (
    FetchedPage,
    FrontierReader,
    FrontierRecord,
    queue_records,
)
from frontierflow.connectors.fetcher.groups import AddressGroups
from frontierflow.connectors.fetcher.outcomes import BAD_URL, STATUS_REASONS, PageOutcome
from frontierflow.connectors.fetcher.queue import HostQueues
from frontierflow.connectors.kafka import ensure_fetched_topic, open_writer
from frontierflow.connectors.kafka_client import RecordWriter
from frontierflow.connectors.scrapy.control import apply_threads
from frontierflow.connectors.scrapy.settings import ScrapyFrontierSettings
from frontierflow.schemas.codecs import AvroCodec
from frontierflow.schemas.records import DeadLetter, FetchEvent, FrontierEntry
from frontierflow.state.hosts import PAUSE_STATUSES

log = logging.getLogger(__name__)

META_KEY = "frontierflow_entry"
"""Request.meta key of the token of the frontier entry a request answers (kept by Scrapy's
retries, which copy the meta)."""

STATS_PREFIX = "frontierflow/"


class _ToReactor:
    """The reader thread's findings, handed to the reactor thread."""

    def __init__(self, link: FrontierLink) -> None:
        self.link = link

    def _call(self, fn: Callable[[], None]) -> None:
        self.link.call_from_thread(fn)

    def frontier_records(self, records: list[FrontierRecord]) -> None:
        if self.link.groups is not None:  # names resolved here, off the reactor
            self.link.groups.warm_records(records)
        self._call(functools.partial(self.link._frontier_records, records))

    def partitions_revoked(self, partitions: set[int]) -> None:
        self._call(functools.partial(self.link._drop, partitions))

    def pages_fetched(self, fetched: list[FetchedPage]) -> None:
        if self.link.groups is not None:
            self.link.groups.warm_pages(fetched)
        self._call(functools.partial(self.link._mark_fetched, fetched))

    def caught_up(self) -> None:
        self._call(self.link._wake)

    def threads(self, threads: int) -> None:
        self._call(functools.partial(self.link._set_threads, threads))


class FrontierLink:
    """See the module docstring. `link_for(crawler)` gives the crawler's one instance."""

    def __init__(self, settings: ScrapyFrontierSettings, crawler: Any) -> None:
        self.settings = settings
        self.crawler = crawler
        # the delay between requests is Scrapy's, per downloader slot; pauses are the rule's
        self.groups = (
            AddressGroups(fixed_hosts=settings.resolve) if settings.group_by == "ip" else None
        )
        """Server addresses of the hosts (FRONTIERFLOW_GROUP_BY=ip); None: each host alone."""
        self.queues = HostQueues(
            0.0, settings.hosts, settings.spend, max_lead=settings.max_lead, group_of=self.groups
        )
        self.reader = FrontierReader(settings.kafka, settings.fetcher_id, _ToReactor(self))
        self.pending: dict[str, FrontierEntry] = {}
        """Token → entry handed to Scrapy and not answered yet."""
        self.partitions: dict[str, int | None] = {}
        """Token → the frontier partition its entry was read from."""
        self.observed: set[str] = set()
        """Tokens whose latest answer the host rule has taken already (`pushed_back`)."""
        self.reserved = 0
        self._tokens = itertools.count()
        self._entry_codec = AvroCodec.for_name("FrontierEntry")
        self._publisher: EventPublisher | None = None
        self._writer: RecordWriter | None = None
        self._reader_stop = threading.Event()
        self._reader_thread: threading.Thread | None = None
        self.reader_error: BaseException | None = None
        self._last_busy = time.monotonic()
        self._reactor: Any = None
        self._wake_call: Any = None
        """The reactor's delayed call of `_wake` at the time the best held entry is due."""
        self.clock: Callable[[], float] = time.time
        """Wall-clock seconds since the epoch (a test sets its own)."""
        self._engine: Any = None
        """Scrapy's engine, from `open` on (the crawler has none before the crawl starts)."""
        self.opened = False

    # ----------------------------------------------------------------- life

    def open(self) -> None:
        if self.opened:
            return
        from twisted.internet import reactor  # Scrapy has installed its reactor by now

        self._reactor = reactor
        self._engine = self.crawler.engine
        ensure_fetched_topic(self.settings.kafka)
        self._writer = open_writer(self.settings.kafka)
        self._publisher = EventPublisher(self._writer, self.settings.kafka.topics)
        self._reader_thread = threading.Thread(
            target=self._read, name="frontier-reader", daemon=True
        )
        self._reader_thread.start()
        self.opened = True
        self._stat_set("concurrency", self._engine.downloader.total_concurrency)

    def close(self) -> None:
        if not self.opened:
            return
        self.opened = False
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
        self._reader_stop.set()
        if self._reader_thread is not None:
            self._reader_thread.join(timeout=30)
        if self._writer is not None:
            try:
                self._writer.flush()
            finally:
                self._writer.close()
        if self.pending:
            log.warning(
                "%d requests closed unanswered (their entries stay queued)", len(self.pending)
            )

    def _read(self) -> None:
        try:
            self.reader.run(self._reader_stop)
        except BaseException as exc:  # reported by `finished`, which closes the spider
            log.error("frontier reader failed: %s", exc)
            self.reader_error = exc
            self.call_from_thread(self._wake)

    def call_from_thread(self, fn: Callable[[], None]) -> None:
        if self._reactor is not None and self.opened:
            self._reactor.callFromThread(fn)

    # ----------------------------------------------------------------- the reactor side

    def _frontier_records(self, records: list[FrontierRecord]) -> None:
        topic = self.settings.kafka.topics.frontier
        queue_records(self.queues, records, self._entry_codec, topic, self._dead)
        self._wake()

    def _dead(self, letter: DeadLetter) -> None:
        assert self._publisher is not None
        self._publisher.dead(letter)
        self._stat_inc("dead_letters")

    def _drop(self, partitions: set[int]) -> None:
        gone = self.queues.drop_partitions(partitions)
        log.info("frontier partitions %s revoked: %d entries handed over", sorted(partitions), gone)

    def _mark_fetched(self, fetched: list[FetchedPage]) -> None:
        self.queues.restore(fetched)

    def _set_threads(self, threads: int) -> None:
        self._stat_inc("decisions")
        if self._engine is None:
            return
        concurrency = self.settings.clamp_concurrency(threads)
        if apply_threads(self._engine.downloader, concurrency) is not None:
            self._stat_set("concurrency", concurrency)
            self._stat_inc("concurrency_changes")
            self._wake()

    def _wake(self) -> None:
        """Ask the engine for a scheduling round now rather than at its next heartbeat
        (every 5 s): Scrapy has no public call for "the scheduler has requests now", so
        this schedules the engine's own `nextcall`, as its `crawl()` does."""
        slot = getattr(self._engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _wake_at(self, at: float | None) -> None:
        """Have `_wake` called at `at` (wall-clock seconds; None: only new entries or an
        answer can free one, and they wake the engine themselves). One call is kept: the
        earliest asked for."""
        if at is None or self._reactor is None:
            return
        delay = max(0.0, at - self.clock())
        due = self._reactor.seconds() + delay
        call = self._wake_call
        if call is not None and call.active():
            if call.getTime() <= due:
                return
            call.cancel()
        self._wake_call = self._reactor.callLater(delay, self._wake)

    # ----------------------------------------------------------------- scheduling

    def budget_spent(self) -> bool:
        budget = self.settings.max_pages
        return budget is not None and self.reserved >= budget

    def finished(self) -> bool:
        """Nothing more will be handed to Scrapy: the reader failed, the budget is spent and
        answered, or nothing was queued or in flight for `idle_exit_s`."""
        if self.reader_error is not None:
            return True
        if self.pending:
            self._last_busy = time.monotonic()
            return False
        if self.budget_spent():
            return True
        idle = self.settings.idle_exit_s
        if len(self.queues) or not self.reader.caught_up:
            self._last_busy = time.monotonic()
        elif idle is not None and time.monotonic() - self._last_busy >= idle:
            log.info("nothing to fetch for %.1f s: letting the spider close", idle)
            return True
        return False

    def next_request(self) -> Request | None:
        """The request for the best entry Scrapy may have now, or None."""
        if not self.opened or not self.reader.caught_up or self.reader_error is not None:
            return None
        while not self.budget_spent():
            job, wake = self.queues.take(self.clock())
            if job is None:
                self._wake_at(wake)
                return None
            entry = job.entry
            if not job.download:
                self._send(already_fetched_event(entry, self.settings.fetcher_id), entry)
                self._stat_inc("answered_without_download")
                continue
            token = str(next(self._tokens))
            self.pending[token] = entry
            self.partitions[token] = job.partition
            self.reserved += 1
            try:
                return Request(
                    entry.url,
                    dont_filter=True,
                    meta={META_KEY: token, "dont_redirect": True},
                )
            except ValueError as exc:  # a URL Scrapy will not request
                self.answer(token, PageOutcome(BAD_URL, entry.url, reason=str(exc)))
        return None

    def owns(self, request: Request) -> bool:
        """The request answers an entry still waiting for its answer (a retry)."""
        return request.meta.get(META_KEY) in self.pending

    def answer(self, token: str, outcome: PageOutcome) -> FetchEvent | None:
        """Publish the one FetchEvent of the entry behind `token` and free its host; None
        when the entry was answered already (or the link is closed)."""
        if not self.opened:  # an answer after the spider closed: its entry stays queued
            return None
        entry = self.pending.pop(token, None)
        if entry is None:
            return None
        partition = self.partitions.pop(token, None)
        event = outcome_event(
            entry,
            outcome,
            self.settings.fetcher_id,
            self.settings.follow_hosts,
            depth=self.queues.depth(entry),
            limits=self.settings.links,
        )
        if self.queues.retries(entry, event.status):
            event = replace(event, will_retry=True)
            self.reserved -= 1  # asked for again: the budget pays for the page once
        self._send(event, entry)
        assert self._publisher is not None
        self._publisher.record_fetch(event)
        self._stat_inc("downloads")
        if outcome.status < 0:
            reason = STATUS_REASONS.get(outcome.status, "error")
            self._stat_inc(f"errors/{reason}")
            log.warning("%s: %s (status %d): %s", entry.url, reason, outcome.status, outcome.reason)
        observed = token in self.observed and event.status in PAUSE_STATUSES
        self.observed.discard(token)
        self.queues.release(entry, self.clock(), event, partition, observed)
        self._wake()
        return event

    def pushed_back(self, token: str, outcome: PageOutcome) -> None:
        """A 429 or 503 to the entry behind `token` that Scrapy may retry itself: its host
        takes the frontier's host rule now (`PushbackMiddleware`), so the retry waits."""
        entry = self.pending.get(token)
        if entry is None:
            return
        event = outcome_event(entry, outcome, self.settings.fetcher_id)
        self.queues.observe(event)
        self.observed.add(token)
        self._stat_inc("pushed_back")

    def may_fetch(self, url: str, now: float) -> bool:
        """Whether the host of a pending entry's `url` may be asked now (a retry of Scrapy's
        waits for the host's pause)."""
        for entry in self.pending.values():
            if entry.url == url:
                return self.queues.may_ask(entry, now)
        return True

    def _send(self, event: FetchEvent, entry: FrontierEntry) -> None:
        assert self._publisher is not None
        self._publisher.publish(event)
        if not event.will_retry:
            self._publisher.answered(entry)
        self._stat_inc("events")

    # ----------------------------------------------------------------- stats

    def _stat_inc(self, name: str) -> None:
        stats = getattr(self.crawler, "stats", None)
        if stats is not None:
            stats.inc_value(STATS_PREFIX + name)

    def _stat_set(self, name: str, value: int) -> None:
        stats = getattr(self.crawler, "stats", None)
        if stats is not None:
            stats.set_value(STATS_PREFIX + name, value)


_LINKS: weakref.WeakKeyDictionary[Any, FrontierLink] = weakref.WeakKeyDictionary()


def link_for(crawler: Any) -> FrontierLink:
    """The crawler's link, made from its settings on first use (ValueError for a bad
    `FRONTIERFLOW_*` setting)."""
    link = _LINKS.get(crawler)
    if link is None:
        link = _LINKS[crawler] = FrontierLink(
            ScrapyFrontierSettings.from_scrapy(crawler.settings), crawler
        )
    return link
