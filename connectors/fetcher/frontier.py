"""Reading the frontier as a fetcher: one member of a consumer group on the compacted
`frontier` topic, plus the latest ScalingDecision for its fetcher id on `fetcher-control`.

On every assignment the new partitions are read from their beginning (the queue is rebuilt
from the compacted topic, tombstones removing URLs), after the pages already fetched on
those partitions' hosts (the `fetched` topic); `caught_up` stays False until the partitions
are read to the end they had when assigned, so an entry is never served before its later
tombstone is read. Revoked partitions' entries are forgotten. `FrontierReader.run` is the
body of a reader thread; it hands what it reads to a `FrontierListener`, which passes it to
the fetcher's own loop (asyncio in the reference fetcher, Twisted's reactor in Scrapy).
`queue_records` then puts the records into the fetcher's `HostQueues`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeAlias

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener

from frontierflow.connectors.fetcher.queue import HostQueues
from frontierflow.connectors.kafka import KafkaSettings
from frontierflow.schemas.codecs import AvroCodec, CodecError
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierEntry,
    ScalingDecision,
    split_frontier_key,
)
from frontierflow.state.urls import is_http_url

log = logging.getLogger(__name__)

POLL_MS = 200

FrontierRecord = tuple[int, int, bytes | None, bytes | None]
"""(partition, offset, key, value) of one record of the frontier topic."""

FetchedPage: TypeAlias = FetchEvent
"""A download recorded on the `fetched` topic (no outlinks, terms or echo)."""


class FrontierListener(Protocol):
    """What the reader found; every method is called on the reader thread."""

    def frontier_records(self, records: list[FrontierRecord]) -> None: ...

    def partitions_revoked(self, partitions: set[int]) -> None: ...

    def pages_fetched(self, fetched: list[FetchedPage]) -> None: ...

    def caught_up(self) -> None: ...

    def threads(self, threads: int) -> None: ...


class _Rebalance(ConsumerRebalanceListener):
    """See the module docstring: seek to the beginning on assignment, forget on revocation."""

    def __init__(self, reader: FrontierReader) -> None:
        self.reader = reader
        self.consumer: KafkaConsumer | None = None
        self.loading: dict[TopicPartition, int] = {}
        self.assigned: list[TopicPartition] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        parts = {tp.partition for tp in revoked}
        if parts:
            self.reader.listener.partitions_revoked(parts)

    def on_partitions_assigned(self, assigned: Any) -> None:
        """Runs on the client's IO thread, which must not block: seek, and leave the rest to
        `load_assigned`, which the reader calls after the poll."""
        if self.consumer is None:
            return
        if not assigned:  # more fetchers than partitions: nothing to load, nothing to serve
            self.reader.caught_up = True
            return
        self.reader.caught_up = False
        self.consumer.seek_to_beginning(*assigned)
        self.assigned = list(assigned)

    def load_assigned(self) -> None:
        """After an assignment: the pages already fetched on the new partitions' hosts, and
        the end offsets the queue must be read up to before it is served."""
        if not self.assigned or self.consumer is None:
            return
        assigned, self.assigned = self.assigned, []
        parts = sorted(tp.partition for tp in assigned)
        fetched = read_fetched(self.reader.kafka, parts)
        self.reader.listener.pages_fetched(fetched)
        ends = self.consumer.end_offsets(assigned)
        self.loading.update({tp: end for tp, end in ends.items() if end > 0})
        log.info(
            "frontier partitions %s assigned: %d pages already fetched there", parts, len(fetched)
        )

    def check_caught_up(self) -> None:
        """Mark the reader caught up once every assigned partition is read to its end."""
        if self.consumer is None or self.assigned:
            return
        for tp in list(self.loading):
            if self.consumer.position(tp) >= self.loading[tp]:
                del self.loading[tp]
        if not self.loading and not self.reader.caught_up:
            self.reader.caught_up = True
            self.reader.listener.caught_up()


class FrontierReader:
    """See the module docstring. `caught_up` is read by the fetcher's workers: nothing is
    taken from the queue before it is True."""

    def __init__(self, kafka: KafkaSettings, fetcher_id: str, listener: FrontierListener) -> None:
        self.kafka = kafka
        self.fetcher_id = fetcher_id
        self.listener = listener
        self.caught_up = False
        self._decision_codec = AvroCodec.for_name("ScalingDecision")

    def run(self, stop: threading.Event) -> None:
        """Read until `stop` is set (the body of the reader thread)."""
        topics = self.kafka.topics
        conn = self.kafka.connection()
        rebalance = _Rebalance(self)
        frontier = KafkaConsumer(
            group_id=self.kafka.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **conn,
        )
        rebalance.consumer = frontier
        frontier.subscribe([topics.frontier], listener=rebalance)
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
                    self.listener.frontier_records(records)
                rebalance.load_assigned()
                rebalance.check_caught_up()
                threads = latest_threads(
                    control.poll(timeout_ms=0), self.fetcher_id, self._decision_codec
                )
                if threads is not None:
                    self.listener.threads(threads)
        finally:
            frontier.close()
            control.close()


def latest_threads(batches: dict[Any, list[Any]], fetcher_id: str, codec: AvroCodec) -> int | None:
    """The thread count of the latest ScalingDecision for `fetcher_id` in `batches`, if any
    (undecodable decisions are skipped with a warning: they are the job's, not input)."""
    threads = None
    me = fetcher_id.encode()
    for recs in batches.values():
        for r in recs:
            if r.key != me or r.value is None:
                continue
            try:
                d = ScalingDecision.from_avro(codec.decode(r.value))
            except (CodecError, KeyError, TypeError) as exc:
                log.warning("undecodable ScalingDecision skipped: %s", exc)
                continue
            if d.fetcher_id == fetcher_id:
                threads = d.threads_after
    return threads


def read_fetched(kafka: KafkaSettings, partitions: list[int]) -> list[FetchedPage]:
    """Every download recorded on the `fetched` topic's `partitions` (the same numbers as
    the frontier's: both are partitioned by host)."""
    topic = kafka.topics.fetched
    codec = AvroCodec.for_name("FetchEvent")
    consumer = KafkaConsumer(enable_auto_commit=False, **kafka.connection())
    try:
        known = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in partitions if p in known]
        if not tps:
            return []
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        out: list[FetchedPage] = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for recs in consumer.poll(timeout_ms=POLL_MS).values():
                for r in recs:
                    if r.value is None:
                        continue
                    try:
                        e = FetchEvent.from_avro(codec.decode(r.value))
                    except (CodecError, KeyError, TypeError, ValueError) as exc:
                        log.warning("undecodable record on %s skipped: %s", topic, exc)
                        continue
                    out.append(e)
        return out
    finally:
        consumer.close()


def queue_records(
    queues: HostQueues,
    records: list[FrontierRecord],
    codec: AvroCodec,
    source: str,
    dead: Callable[[DeadLetter], None],
) -> None:
    """Frontier records into `queues`: an entry is offered, a tombstone removes its key; an
    undecodable record or a non-http(s) URL becomes a dead letter (read from `source`)."""
    for partition, offset, key, value in records:
        if value is None:
            if key is not None:
                queues.remove_key(split_frontier_key(key.decode("utf-8", "replace")))
            continue
        try:
            entry = FrontierEntry.from_avro(codec.decode(value))
        except (CodecError, KeyError, TypeError, ValueError) as exc:
            error_class, message = "CodecError", str(exc)
        else:
            if is_http_url(entry.url):
                queues.offer(entry, partition)
                continue
            error_class, message = "InvalidUrl", f"not an http(s) URL: {entry.url[:200]!r}"
        log.warning("frontier record %d/%d to dead-letter: %s", partition, offset, message)
        dead(
            DeadLetter(
                source=source,
                partition=partition,
                offset=offset,
                error_class=error_class,
                message=message,
                raw=value,
                at=int(time.time() * 1000),
            )
        )
