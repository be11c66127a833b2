"""The fetch loop: frontier in from Kafka, pages over HTTP, FetchEvents out to Kafka.

A reader thread consumes the compacted `frontier` topic as one consumer group (each
fetcher owns some partitions; on every assignment it reads them from the beginning, so the
queue is rebuilt from the topic, tombstones removing URLs) and `fetcher-control` (the
latest ScalingDecision for this fetcher id sets the worker count). It hands what it read to
the asyncio loop, where workers take the best entry of a free, rested host, ask robots.txt,
download, and publish one FetchEvent per entry (status 208 without a download for a reply
request whose page was already fetched in its cycle). Stops on `stop`, at the page budget,
or when idle for `idle_exit_s`; in-flight requests finish and every event is acknowledged
before it returns. Kafka is read and written through the client interface
(`connectors.kafka_client`) with the library the settings name (`--kafka-client`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from frontierflow.connectors.fetcher.events import (
    EventPublisher,
    already_fetched_event,
    fetch_event,
    outcome_event,
)
from frontierflow.connectors.fetcher.frontier import (
    POLL_MS,
    FetchedPage,
    FrontierReader,
    FrontierRecord,
    queue_records,
)
from frontierflow.connectors.fetcher.groups import AddressGroups
from frontierflow.connectors.fetcher.http import (
    HOST_PROBLEMS,
    ROBOTS_DISALLOWED,
    STATUS_REASONS,
    PageOutcome,
    fetch_page,
    open_session,
    url_problem,
)
from frontierflow.connectors.fetcher.metrics import FetcherMetrics, status_class
from frontierflow.connectors.fetcher.queue import HostQueues, Job
from frontierflow.connectors.fetcher.robots import HostRules, rules_from_answer
from frontierflow.connectors.fetcher.settings import FetcherSettings
from frontierflow.connectors.kafka import KafkaSettings, ensure_fetched_topic, open_writer
from frontierflow.connectors.kafka_client import BrokerError
from frontierflow.schemas.codecs import AvroCodec
from frontierflow.schemas.records import DeadLetter, FetchEvent, FrontierEntry

log = logging.getLogger(__name__)


@dataclass(slots=True)
class FetcherStats:
    """What the fetcher did (not persisted)."""

    downloads: int = 0
    pages: int = 0
    """Downloads that count against the page budget (not the answers asked for again)."""
    answered: int = 0
    """Reply requests answered without a download (status 208)."""
    errors: int = 0
    events: int = 0
    queued_max: int = 0
    dead_letters: int = 0
    worker_counts: list[tuple[float, int]] = field(default_factory=list)
    """(wall time, workers) at start and at every change."""


class _ToLoop:
    """The reader thread's findings, handed to the fetcher's event loop."""

    def __init__(self, fetcher: Fetcher) -> None:
        self.fetcher = fetcher

    def frontier_records(self, records: list[FrontierRecord]) -> None:
        if self.fetcher.groups is not None:  # names resolved here, off the event loop
            self.fetcher.groups.warm_records(records)
        self.fetcher._post(functools.partial(self.fetcher._frontier_records, records))

    def partitions_revoked(self, partitions: set[int]) -> None:
        self.fetcher._post(functools.partial(self.fetcher._drop, partitions))

    def pages_fetched(self, fetched: list[FetchedPage]) -> None:
        if self.fetcher.groups is not None:
            self.fetcher.groups.warm_pages(fetched)
        self.fetcher._post(functools.partial(self.fetcher._mark_fetched, fetched))

    def caught_up(self) -> None:
        self.fetcher._post(lambda: None)  # wake the workers

    def threads(self, threads: int) -> None:
        self.fetcher._post(functools.partial(self.fetcher._set_workers, threads))


class Fetcher:
    """See the module docstring. `run()` blocks until the fetcher stops."""

    def __init__(
        self,
        settings: FetcherSettings,
        kafka: KafkaSettings,
        *,
        metrics: FetcherMetrics | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.settings = settings
        self.kafka = kafka
        self.metrics = metrics or FetcherMetrics()
        self.stop = stop or threading.Event()
        self.stats = FetcherStats()
        self.groups = AddressGroups(settings.resolve) if settings.group_by == "ip" else None
        """Server addresses of the hosts (`--group-by ip`); None: each host its own group."""
        self.queues = HostQueues(
            settings.delay_s,
            settings.hosts,
            settings.spend,
            max_lead=settings.max_lead,
            group_of=self.groups,
        )
        self.target_workers = settings.workers
        self._robots: dict[str, HostRules] = {}
        self._entry_codec = AvroCodec.for_name("FrontierEntry")
        self.reader = FrontierReader(kafka, settings.fetcher_id, _ToLoop(self))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._reserved = 0
        self._last_busy = time.monotonic()
        self._stopping = False
        self._reader_error: BaseException | None = None

    @property
    def caught_up(self) -> bool:
        """Every assigned frontier partition read to its end as of its assignment (set by
        the reader thread; workers take nothing before)."""
        return self.reader.caught_up

    # ----------------------------------------------------------------- entry point

    def run(self) -> FetcherStats:
        asyncio.run(self._main())
        if self._reader_error is not None:
            raise self._reader_error
        return self.stats

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        ensure_fetched_topic(self.kafka)
        writer = open_writer(self.kafka)
        self.publisher = EventPublisher(writer, self.kafka.topics)
        reader_stop = threading.Event()
        reader = threading.Thread(
            target=self._read, args=(reader_stop,), name="frontier-reader", daemon=True
        )
        reader.start()
        workers: dict[int, asyncio.Task[None]] = {}
        self.stats.worker_counts.append((time.time(), self.target_workers))
        try:
            async with open_session(self.settings) as session:
                while not self._finished():
                    for wid in range(self.target_workers):
                        if wid not in workers or workers[wid].done():
                            workers[wid] = asyncio.create_task(self._worker(wid, session))
                    self.metrics.workers.set(self.target_workers)
                    self.metrics.queued.set(len(self.queues))
                    self.metrics.in_flight.set(self.queues.in_flight)
                    await self._wait_change(POLL_MS / 1000)
                self._stopping = True
                self._notify()
                await asyncio.gather(*workers.values(), return_exceptions=True)
        finally:
            reader_stop.set()
            reader.join(timeout=30)
            try:
                self.publisher.flush()
            finally:
                writer.close()
        log.info(
            "fetcher %s stopped: %d downloads, %d answered without download, %d errors",
            self.settings.fetcher_id,
            self.stats.downloads,
            self.stats.answered,
            self.stats.errors,
        )

    def _finished(self) -> bool:
        if self.stop.is_set() or self._reader_error is not None:
            return True
        budget = self.settings.max_pages
        if budget is not None and self._reserved >= budget and not self.queues.in_flight:
            # pages, not requests: an answer asked for again (`will_retry`) is not one
            log.info("page budget of %d reached", budget)
            return True
        idle = self.settings.idle_exit_s
        if len(self.queues) or self.queues.in_flight or not self.caught_up:
            self._last_busy = time.monotonic()  # loading partitions counts as busy
        elif idle is not None and time.monotonic() - self._last_busy >= idle:
            log.info("nothing to fetch for %.1f s: stopping", idle)
            return True
        return False

    # ----------------------------------------------------------------- the reader thread

    def _post(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the event loop (from the reader thread) and wake the workers."""
        loop = self._loop
        assert loop is not None

        def apply() -> None:
            fn()
            self._notify()

        loop.call_soon_threadsafe(apply)

    def _read(self, stop: threading.Event) -> None:
        try:
            self.reader.run(stop)
        except BaseException as exc:  # handed to run(), which raises it
            log.error("frontier reader failed: %s", exc)
            self._reader_error = exc

    # ----------------------------------------------------------------- on the event loop

    def _frontier_records(self, records: list[FrontierRecord]) -> None:
        queue_records(
            self.queues, records, self._entry_codec, self.kafka.topics.frontier, self._dead
        )
        self.stats.queued_max = max(self.stats.queued_max, len(self.queues))

    def _dead(self, letter: DeadLetter) -> None:
        self.publisher.dead(letter)
        self.stats.dead_letters += 1
        self.metrics.dead.labels(letter.error_class).inc()

    def _mark_fetched(self, fetched: list[FetchedPage]) -> None:
        self.queues.restore(fetched)

    def _drop(self, partitions: set[int]) -> None:
        gone = self.queues.drop_partitions(partitions)
        log.info("frontier partitions %s revoked: %d entries handed over", sorted(partitions), gone)

    def _set_workers(self, threads: int) -> None:
        workers = self.settings.clamp_workers(threads)
        self.metrics.decisions.inc()
        if workers != self.target_workers:
            log.info("ScalingDecision: %d -> %d workers", self.target_workers, workers)
            self.target_workers = workers
            self.stats.worker_counts.append((time.time(), workers))

    def _notify(self) -> None:
        """Wake every waiting worker (a broadcast: the event is replaced once set)."""
        assert self._changed is not None
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _wait_change(self, timeout: float | None) -> None:
        """Until something changes (entries read, a host released) or `timeout` passes."""
        assert self._changed is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    # ----------------------------------------------------------------- workers

    def _may_take(self, wid: int) -> bool:
        if self._stopping or wid >= self.target_workers:
            return False
        budget = self.settings.max_pages
        return budget is None or self._reserved < budget

    async def _worker(self, wid: int, session: aiohttp.ClientSession) -> None:
        while self._may_take(wid):
            if not self.caught_up:
                await self._wait_change(POLL_MS / 1000)
                continue
            job, wake = self.queues.take(time.time())
            if job is None:
                timeout = POLL_MS / 1000 if wake is None else max(0.0, wake - time.time())
                await self._wait_change(min(timeout, POLL_MS / 1000))
                continue
            if not job.download:
                self._publish(self._answer(job.entry))
                self._answered(job.entry)
                continue
            self._reserved += 1
            try:
                event = await self._download(job, session)
            except Exception as exc:  # a bug must not lose the entry's answer
                log.exception("fetching %s failed unexpectedly", job.entry.url)
                event = self._event(job.entry, -1, fetch_ms=0.0)
                self.metrics.errors.labels(type(exc).__name__).inc()
            if self.queues.retries(job.entry, event.status):
                event = replace(event, will_retry=True)
                self._reserved -= 1  # asked for again: the budget pays for the page once
            else:
                self.stats.pages += 1
            self._publish(event)
            self._record_fetch(event)
            if not event.will_retry:
                self._answered(job.entry)
            before = self._pauses(event)
            self.queues.release(job.entry, time.time(), event, job.partition)
            if self._pauses(event) > before:
                self._pushed_back(event)
            self._notify()

    async def _download(self, job: Job, session: aiohttp.ClientSession) -> FetchEvent:
        entry = job.entry
        host = HostQueues.host_key(entry)

        async def rest() -> None:
            await asyncio.sleep(self._host_delay(host))

        problem = url_problem(entry.url, self.settings.allow_private)
        if problem is not None:  # refused before anything is sent, robots.txt included
            return self._outcome_event(entry, PageOutcome(problem[0], entry.url, reason=problem[1]))
        rules = await self._rules(entry.url, host, session, rest) if self.settings.robots else None
        if isinstance(rules, PageOutcome):
            return self._outcome_event(entry, rules)
        if rules is not None and not rules.allows(entry.url, self.settings.user_agent):
            log.info("robots.txt disallows %s", entry.url)
            return self._outcome_event(
                entry, PageOutcome(ROBOTS_DISALLOWED, entry.url, reason="robots.txt")
            )
        outcome = await fetch_page(session, entry.url, self.settings, rest)
        return self._outcome_event(entry, outcome, self._crawl_delay_ms(host))

    def _crawl_delay_ms(self, host: str) -> int | None:
        rules = self._robots.get(host)
        delay = None if rules is None else rules.crawl_delay(self.settings.user_agent)
        return None if delay is None else round(delay * 1000)

    def _pauses(self, event: FetchEvent) -> int:
        state = self.queues.state_of(event)
        return 0 if state is None else state.pauses

    def _pushed_back(self, event: FetchEvent) -> None:
        """Log and count a pause the host rule began on this answer."""
        state = self.queues.state_of(event)
        assert state is not None
        self.metrics.pauses.labels(state.reason).inc()
        log.info(
            "%s paused for %.1f s (%s, level %d)",
            event.host,
            (state.paused_until - event.fetched_at) / 1000,
            state.reason,
            state.level,
        )

    def _host_delay(self, host: str) -> float:
        rules = self._robots.get(host)
        delay = None if rules is None else rules.crawl_delay(self.settings.user_agent)
        return max(self.settings.delay_s, delay or 0.0)

    async def _rules(
        self,
        url: str,
        host: str,
        session: aiohttp.ClientSession,
        rest: Callable[[], Any],
    ) -> HostRules | PageOutcome:
        """The host's robots.txt rules, asked for once (the host is ours meanwhile: the
        request counts for its politeness, so the page waits a delay after it). When the
        host itself cannot be asked (a refused address, an unresolvable name), that outcome
        is the page's too, and nothing is remembered."""
        rules = self._robots.get(host)
        if rules is not None and not rules.expired(time.monotonic()):
            return rules
        parts = urlsplit(url)
        robots_url = f"{parts.scheme}://{parts.netloc}/robots.txt"
        outcome = await fetch_page(session, robots_url, self.settings, rest, accept=None)
        self.metrics.robots.inc()
        if outcome.status in HOST_PROBLEMS:
            return replace(outcome, final_url=url, reason=f"{outcome.reason} (asking robots.txt)")
        rules = rules_from_answer(outcome.status, outcome.body)
        if rules.unreachable:
            log.warning(
                "robots.txt of %s unreachable (%s): host paused",
                host,
                outcome.reason or outcome.status,
            )
        self._robots[host] = rules
        delay = rules.crawl_delay(self.settings.user_agent)
        if delay is not None:
            self.queues.set_host_delay(host, delay)
        await rest()
        return rules

    # ----------------------------------------------------------------- events

    def _event(self, entry: FrontierEntry, status: int, **fields: Any) -> FetchEvent:
        return fetch_event(entry, status, self.settings.fetcher_id, **fields)

    def _answer(self, entry: FrontierEntry) -> FetchEvent:
        """A reply request for a page already fetched in its cycle (schemas/README.md)."""
        self.stats.answered += 1
        return already_fetched_event(entry, self.settings.fetcher_id)

    def _outcome_event(
        self, entry: FrontierEntry, outcome: PageOutcome, crawl_delay_ms: int | None = None
    ) -> FetchEvent:
        self.stats.downloads += 1
        self.metrics.fetch_seconds.observe(outcome.fetch_ms / 1000)
        self.metrics.bytes.inc(outcome.size)
        if outcome.status < 0:
            self.stats.errors += 1
            reason = STATUS_REASONS.get(outcome.status, "error")
            self.metrics.errors.labels(reason).inc()
            log.warning("%s: %s (status %d): %s", entry.url, reason, outcome.status, outcome.reason)
        return outcome_event(
            entry,
            outcome,
            self.settings.fetcher_id,
            self.settings.follow_hosts,
            crawl_delay_ms,
            depth=self.queues.depth(entry),
            limits=self.settings.links,
        )

    def _answered(self, entry: FrontierEntry) -> None:
        self.publisher.answered(entry)

    def _record_fetch(self, event: FetchEvent) -> None:
        self.publisher.record_fetch(event)

    def _publish(self, event: FetchEvent) -> None:
        self.stats.events += 1
        self.metrics.pages.labels(status_class(event.status)).inc()
        try:
            self.publisher.publish(event)
        except BrokerError as exc:
            log.error("FetchEvent for %s not sent: %s", event.url, exc)
            raise
