"""Reading the frontier as a fetcher: one member of a consumer group on the compacted
`frontier` topic, plus the latest ScalingDecision for its fetcher id on `fetcher-control`.

On every assignment the new partitions are read from their beginning (the queue is rebuilt
from the compacted topic, tombstones removing URLs), after the pages already fetched on
those partitions' hosts (the `fetched` topic); `caught_up` stays False until the partitions
are read to the end they had when assigned, so an entry is never served before its later
tombstone is read. Revoked partitions' entries are forgotten. `FrontierReader.run` is the
body of a reader thread; it hands what it reads to a `FrontierListener`, which passes it to
the fetcher's own loop (asyncio in the reference fetcher, Twisted's reactor in Scrapy).
`queue_records` then puts the records into the fetcher's `HostQueues`. Every read goes through
the Kafka client interface (`connectors.kafka_client`), with the library the settings name.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeAlias

from frontierflow.connectors.fetcher.queue import HostQueues
from frontierflow.connectors.kafka import KafkaSettings, open_reader
from frontierflow.connectors.kafka_client import KafkaRecord, RecordReader, read_to_end
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

FrontierRecord: TypeAlias = KafkaRecord
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


class _Loading:
    """The frontier reader's `RebalanceListener` (see the module docstring): on assignment,
    the pages already fetched on the new partitions' hosts and the ends the queue must be
    read up to; on revocation, the partitions' entries forgotten. Called inside the
    frontier reader's poll, before any record of a partition it assigns."""

    def __init__(self, owner: FrontierReader, frontier: RecordReader) -> None:
        self.owner = owner
        self.frontier = frontier
        self.ends: dict[int, int] = {}
        """partition → the end it had when assigned, while not read that far."""

    def revoked(self, partitions: list[int]) -> None:
        for p in partitions:
            self.ends.pop(p, None)
        self.owner.listener.partitions_revoked(set(partitions))

    def assigned(self, partitions: list[int]) -> None:
        if not partitions:  # more fetchers than partitions: nothing to load, nothing to serve
            self.owner.caught_up = True
            return
        self.owner.caught_up = False
        fetched = read_fetched(self.owner.kafka, partitions)
        self.owner.listener.pages_fetched(fetched)
        ends = self.frontier.end_offsets(partitions)
        self.ends.update({p: end for p, end in ends.items() if end > 0})
        log.info(
            "frontier partitions %s assigned: %d pages already fetched there",
            partitions,
            len(fetched),
        )

    def check_caught_up(self) -> None:
        """Mark the reader caught up once every assigned partition is read to its end."""
        for p in [p for p, end in self.ends.items() if self.frontier.position(p) >= end]:
            del self.ends[p]
        if not self.ends and not self.owner.caught_up:
            self.owner.caught_up = True
            self.owner.listener.caught_up()


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
        """Read until `stop` is set (the body of the reader thread), through the library
        `KafkaSettings.client_library` names."""
        topics = self.kafka.topics
        with contextlib.ExitStack() as readers:
            frontier = open_reader(self.kafka)
            readers.callback(frontier.close)
            loading = _Loading(self, frontier)
            frontier.subscribe(topics.frontier, loading, start="beginning")
            control: RecordReader | None = None
            if frontier.topic_partitions(topics.fetcher_control):
                control = open_reader(self.kafka)
                readers.callback(control.close)
                control.assign(topics.fetcher_control, {})
            else:  # no decisions for anyone: the worker count stays as started
                log.warning("topic %r is missing: no ScalingDecisions", topics.fetcher_control)
            while not stop.is_set():
                records = frontier.poll(5000, POLL_MS)
                if records:
                    self.listener.frontier_records(records)
                loading.check_caught_up()
                if control is None:
                    continue
                threads = latest_threads(
                    control.poll(5000, 0), self.fetcher_id, self._decision_codec
                )
                if threads is not None:
                    self.listener.threads(threads)


def latest_threads(records: list[KafkaRecord], fetcher_id: str, codec: AvroCodec) -> int | None:
    """The thread count of the latest ScalingDecision for `fetcher_id` in `records`, if any
    (undecodable decisions are skipped with a warning: they are the job's, not input)."""
    threads = None
    me = fetcher_id.encode()
    for r in records:
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
    reader = open_reader(kafka)
    try:
        if not reader.topic_partitions(topic):
            return []
        records = read_to_end(reader, topic, partitions)
    finally:
        reader.close()
    out: list[FetchedPage] = []
    for r in records:
        if r.value is None:
            continue
        try:
            out.append(FetchEvent.from_avro(codec.decode(r.value)))
        except (CodecError, KeyError, TypeError, ValueError) as exc:
            log.warning("undecodable record on %s skipped: %s", topic, exc)
    return out


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
