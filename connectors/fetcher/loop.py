"""The fetch loop: frontier in from Kafka, pages over HTTP, FetchEvents out to Kafka.

A reader thread consumes the compacted `frontier` topic as one consumer group (each
fetcher owns some partitions; on every assignment it reads them from the beginning, so the
queue is rebuilt from the topic, tombstones removing URLs) and `fetcher-control` (the
latest ScalingDecision for this fetcher id sets the worker count). It hands what it read to
the asyncio loop, where workers take the best entry of a free, rested host, ask robots.txt,
download, and publish one FetchEvent per entry (status 208 without a download for a reply
request whose page was already fetched in its cycle). Stops on `stop`, at the page budget,
or when idle for `idle_exit_s`; in-flight requests finish and every event is acknowledged
before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError

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
from frontierflow.connectors.fetcher.pages import link_targets, read_page
from frontierflow.connectors.fetcher.queue import HostQueues, Job, is_reply_request
from frontierflow.connectors.fetcher.robots import HostRules, rules_from_answer
from frontierflow.connectors.fetcher.settings import FetcherSettings
from frontierflow.connectors.kafka import KafkaSettings, ensure_fetched_topic, host_partition
from frontierflow.schemas.codecs import AvroCodec, CodecError
from frontierflow.schemas.records import (
    ALREADY_FETCHED,
    DeadLetter,
    FetchEvent,
    FrontierEntry,
    ScalingDecision,
    frontier_record_key,
    split_frontier_key,
)
from frontierflow.state.urls import is_http_url

log = logging.getLogger(__name__)

POLL_MS = 200


@dataclass(slots=True)
class FetcherStats:
    """What the fetcher did (not persisted)."""

    downloads: int = 0
    answered: int = 0
    """Reply requests answered without a download (status 208)."""
    errors: int = 0
    events: int = 0
    queued_max: int = 0
    dead_letters: int = 0
    worker_counts: list[tuple[float, int]] = field(default_factory=list)
    """(wall time, workers) at start and at every change."""


class _Rebalance(ConsumerRebalanceListener):
    """Re-read every newly assigned partition from its beginning (the queue is rebuilt from
    the compacted topic), after the pages already fetched on those partitions' hosts (the
    `fetched` topic); nothing is taken from the queue until the partitions are read to the
    end they had when assigned, so an entry is never served before its later tombstone is
    read. Forget the entries of revoked partitions."""

    def __init__(self, fetcher: Fetcher) -> None:
        self.fetcher = fetcher
        self.consumer: KafkaConsumer | None = None
        self.loading: dict[TopicPartition, int] = {}
        self.assigned: list[TopicPartition] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        parts = {tp.partition for tp in revoked}
        if parts:
            self.fetcher._post(functools.partial(self.fetcher._drop, parts))

    def on_partitions_assigned(self, assigned: Any) -> None:
        """Runs on the client's IO thread, which must not block: seek, and leave the rest to
        `load_assigned`, which the reader calls after the poll."""
        if self.consumer is None:
            return
        if not assigned:  # more fetchers than partitions: nothing to load, nothing to serve
            self.fetcher.caught_up = True
            return
        self.fetcher.caught_up = False
        self.consumer.seek_to_beginning(*assigned)
        self.assigned = list(assigned)

    def load_assigned(self) -> None:
        """After an assignment: the pages already fetched on the new partitions' hosts, and
        the end offsets the queue must be read up to before it is served."""
        if not self.assigned or self.consumer is None:
            return
        assigned, self.assigned = self.assigned, []
        parts = sorted(tp.partition for tp in assigned)
        fetched = self.fetcher._read_fetched(parts)
        self.fetcher._post(functools.partial(self.fetcher._mark_fetched, fetched))
        ends = self.consumer.end_offsets(assigned)
        self.loading.update({tp: end for tp, end in ends.items() if end > 0})
        log.info(
            "frontier partitions %s assigned: %d pages already fetched there", parts, len(fetched)
        )

    def check_caught_up(self) -> None:
        """Mark the fetcher caught up once every assigned partition is read to its end."""
        if self.consumer is None or self.assigned:
            return
        for tp in list(self.loading):
            if self.consumer.position(tp) >= self.loading[tp]:
                del self.loading[tp]
        if not self.loading and not self.fetcher.caught_up:
            self.fetcher.caught_up = True
            self.fetcher._post(lambda: None)  # wake the workers


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
        self.queues = HostQueues(settings.delay_s)
        self.target_workers = settings.workers
        self._robots: dict[str, HostRules] = {}
        self._entry_codec = AvroCodec.for_name("FrontierEntry")
        self._decision_codec = AvroCodec.for_name("ScalingDecision")
        self._event_codec = AvroCodec.for_name("FetchEvent")
        self._dead_codec = AvroCodec.for_name("DeadLetter")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: asyncio.Event | None = None
        self._reserved = 0
        self._last_busy = time.monotonic()
        self._stopping = False
        self._reader_error: BaseException | None = None
        self._partition_counts: dict[str, int] = {}
        self.caught_up = False
        """Every assigned frontier partition read to its end as of its assignment (set by
        the reader thread; workers take nothing before)."""

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
        self.producer = KafkaProducer(acks="all", linger_ms=5, **self.kafka.connection())
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
            self.producer.flush(timeout=30)
            self.producer.close(timeout=10)
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
        if budget is not None and self.stats.downloads >= budget:
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
            self._read_topics(stop)
        except BaseException as exc:  # handed to run(), which raises it
            log.error("frontier reader failed: %s", exc)
            self._reader_error = exc

    def _read_topics(self, stop: threading.Event) -> None:
        topics = self.kafka.topics
        conn = self.kafka.connection()
        listener = _Rebalance(self)
        frontier = KafkaConsumer(
            group_id=self.kafka.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **conn,
        )
        listener.consumer = frontier
        frontier.subscribe([topics.frontier], listener=listener)
        control = KafkaConsumer(enable_auto_commit=False, **conn)
        parts = control.partitions_for_topic(topics.fetcher_control) or set()
        control_tps = [TopicPartition(topics.fetcher_control, p) for p in sorted(parts)]
        control.assign(control_tps)
        if control_tps:
            control.seek_to_beginning(*control_tps)
        try:
            while not stop.is_set():
                batches = frontier.poll(timeout_ms=POLL_MS, max_records=5000)
                records = [
                    (tp.partition, r.offset, r.key, r.value)
                    for tp, recs in batches.items()
                    for r in recs
                ]
                if records:
                    self._post(functools.partial(self._frontier_records, records))
                listener.load_assigned()
                listener.check_caught_up()
                threads = self._latest_threads(control.poll(timeout_ms=0))
                if threads is not None:
                    self._post(functools.partial(self._set_workers, threads))
        finally:
            frontier.close()
            control.close()

    def _latest_threads(self, batches: dict[Any, list[Any]]) -> int | None:
        """The thread count of the latest ScalingDecision for this fetcher, if any."""
        threads = None
        me = self.settings.fetcher_id.encode()
        for recs in batches.values():
            for r in recs:
                if r.key != me or r.value is None:
                    continue
                try:
                    d = ScalingDecision.from_avro(self._decision_codec.decode(r.value))
                except (CodecError, KeyError, TypeError) as exc:
                    log.warning("undecodable ScalingDecision skipped: %s", exc)
                    continue
                if d.fetcher_id == self.settings.fetcher_id:
                    threads = d.threads_after
        return threads

    # ----------------------------------------------------------------- on the event loop

    def _frontier_records(self, records: list[tuple[int, int, bytes | None, bytes | None]]) -> None:
        for partition, offset, key, value in records:
            if value is None:
                if key is not None:
                    self.queues.remove_key(split_frontier_key(key.decode("utf-8", "replace")))
                continue
            try:
                entry = FrontierEntry.from_avro(self._entry_codec.decode(value))
            except (CodecError, KeyError, TypeError, ValueError) as exc:
                self._dead(partition, offset, "CodecError", str(exc), value)
                continue
            if not is_http_url(entry.url):
                self._dead(
                    partition,
                    offset,
                    "InvalidUrl",
                    f"not an http(s) URL: {entry.url[:200]!r}",
                    value,
                )
                continue
            self.queues.offer(entry, partition)
        self.stats.queued_max = max(self.stats.queued_max, len(self.queues))

    def _dead(
        self, partition: int, offset: int, error_class: str, message: str, raw: bytes
    ) -> None:
        letter = DeadLetter(
            source=self.kafka.topics.frontier,
            partition=partition,
            offset=offset,
            error_class=error_class,
            message=message,
            raw=raw,
            at=int(time.time() * 1000),
        )
        log.warning("frontier record %d/%d to dead-letter: %s", partition, offset, message)
        self.producer.send(
            self.kafka.topics.dead_letter, value=self._dead_codec.encode(letter.to_avro())
        )
        self.stats.dead_letters += 1
        self.metrics.dead.labels(error_class).inc()

    def _read_fetched(self, partitions: list[int]) -> list[tuple[str, int, str]]:
        """(crawl id, cycle, URL) of every download recorded on the `fetched` topic's
        `partitions` (the same numbers as the frontier's: both are partitioned by host)."""
        topic = self.kafka.topics.fetched
        consumer = KafkaConsumer(enable_auto_commit=False, **self.kafka.connection())
        try:
            known = consumer.partitions_for_topic(topic) or set()
            tps = [TopicPartition(topic, p) for p in partitions if p in known]
            if not tps:
                return []
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            ends = consumer.end_offsets(tps)
            out: list[tuple[str, int, str]] = []
            while any(consumer.position(tp) < ends[tp] for tp in tps):
                for recs in consumer.poll(timeout_ms=POLL_MS).values():
                    for r in recs:
                        if r.value is None:
                            continue
                        try:
                            e = FetchEvent.from_avro(self._event_codec.decode(r.value))
                        except (CodecError, KeyError, TypeError, ValueError) as exc:
                            log.warning("undecodable record on %s skipped: %s", topic, exc)
                            continue
                        out.append((e.crawl_id, e.cycle, e.url))
            return out
        finally:
            consumer.close()

    def _mark_fetched(self, fetched: list[tuple[str, int, str]]) -> None:
        for crawl_id, cycle, url in fetched:
            self.queues.mark_url_fetched(crawl_id, cycle, url)

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
            job, wake = self.queues.take(time.monotonic())
            if job is None:
                timeout = POLL_MS / 1000 if wake is None else max(0.0, wake - time.monotonic())
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
            self._publish(event)
            self._record_fetch(event)
            self._answered(job.entry)
            self.queues.mark_fetched(job.entry)
            self.queues.release(job.entry, time.monotonic())
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
        return self._outcome_event(entry, outcome)

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
        return FetchEvent(
            url=entry.url,
            fetched_at=int(time.time() * 1000),
            status=status,
            fetcher_id=self.settings.fetcher_id,
            host=entry.host,
            via=entry.via,
            crawl_id=entry.crawl_id,
            cycle=entry.cycle,
            echo=dict(entry.echo),
            **fields,
        )

    def _answer(self, entry: FrontierEntry) -> FetchEvent:
        """A reply request for a page already fetched in its cycle (schemas/README.md)."""
        self.stats.answered += 1
        return self._event(entry, ALREADY_FETCHED)

    def _outcome_event(self, entry: FrontierEntry, outcome: PageOutcome) -> FetchEvent:
        self.stats.downloads += 1
        self.metrics.fetch_seconds.observe(outcome.fetch_ms / 1000)
        self.metrics.bytes.inc(outcome.size)
        if outcome.status < 0:
            self.stats.errors += 1
            reason = STATUS_REASONS.get(outcome.status, "error")
            self.metrics.errors.labels(reason).inc()
            log.warning("%s: %s (status %d): %s", entry.url, reason, outcome.status, outcome.reason)
            return self._event(entry, outcome.status, fetch_ms=outcome.fetch_ms, bytes=outcome.size)
        if outcome.redirect_to is not None:
            return self._event(
                entry,
                outcome.status,
                # the target as a link of the page: normalised, and only within the scope
                outlinks=link_targets(
                    outcome.final_url, [outcome.redirect_to], self.settings.follow_hosts
                ),
                fetch_ms=outcome.fetch_ms,
            )
        if outcome.body is None:
            return self._event(entry, outcome.status, fetch_ms=outcome.fetch_ms, bytes=outcome.size)
        page = read_page(outcome.final_url, outcome.body, self.settings.follow_hosts)
        return self._event(
            entry,
            outcome.status,
            outlinks=page.outlinks,
            terms=page.terms,
            content_hash=hashlib.sha256(outcome.body).hexdigest(),
            bytes=outcome.size,
            fetch_ms=outcome.fetch_ms,
        )

    def _partitions(self, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is None:
            count = self._partition_counts[topic] = len(self.producer.partitions_for(topic) or {0})
        return count

    def _answered(self, entry: FrontierEntry) -> None:
        """A reply request is answered: its own record on the frontier topic (keyed by URL
        and parent) is removed, so a fetcher that rebuilds its queue does not answer it
        again. Plain entries are removed by the job, when it has read the FetchEvent."""
        if not is_reply_request(entry):
            return
        topic = self.kafka.topics.frontier
        part = host_partition(entry.url, self._partitions(topic))
        key = frontier_record_key(entry).encode()
        self.producer.send(topic, key=key, value=None, partition=part)

    def _record_fetch(self, event: FetchEvent) -> None:
        """The download on the `fetched` topic (no outlinks, terms or echo), in the
        partition of its host, for whichever fetcher owns the host next."""
        if event.status == ALREADY_FETCHED:
            return
        slim = replace(event, outlinks=(), terms=None, text=None, echo={})
        topic = self.kafka.topics.fetched
        part = host_partition(event.url, self._partitions(topic))
        value = self._event_codec.encode(slim.to_avro())
        self.producer.send(topic, key=event.url.encode(), value=value, partition=part)

    def _publish(self, event: FetchEvent) -> None:
        self.stats.events += 1
        self.metrics.pages.labels(status_class(event.status)).inc()
        value = self._event_codec.encode(event.to_avro())
        try:
            self.producer.send(self.kafka.topics.fetch_events, key=event.host.encode(), value=value)
        except KafkaError as exc:
            log.error("FetchEvent for %s not sent: %s", event.url, exc)
            raise
