"""The librdkafka backend of the Kafka client interface, through confluent-kafka.

The same guarantees as the kafka-python backend (`connectors.kafka_python`): the reader assigns
partitions by hand from the caller's offsets, or joins a group with eager assignors and hands
its changes to the caller's listener inside `poll`;
the writer sends with acks from all replicas, lz4 and idempotence, partitions keyed records
without an explicit partition by murmur2 as Kafka's Java client and kafka-python do, and its
`flush` raises SinkError unless the broker acknowledged every record. Connection settings
arrive in kafka-python's names (`CLIENT_SETTINGS`) and are mapped to librdkafka's by
`connectors.librdkafka_config`; a setting with no librdkafka equivalent is refused, never
dropped.
librdkafka reports successful deliveries to nobody (`delivery.report.only.error`): a
Python call per acknowledged record is the cost this backend exists to avoid.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from frontierflow.connectors.kafka_client import (
    ASSIGNORS,
    BrokerError,
    GroupStart,
    KafkaRecord,
    RebalanceListener,
    RecordReader,
    RecordWriter,
    SinkError,
    TopicAdmin,
    TopicSpec,
    broker_errors,
)
from frontierflow.connectors.kafka_settings import KafkaSettings
from frontierflow.connectors.librdkafka_config import librdkafka_config

log = logging.getLogger(__name__)

METADATA_TIMEOUT_S = 10.0
"""How long a metadata or watermark request may take before it counts as a broker error."""

RETRY_S = 0.1
LEADER_UNKNOWN = frozenset(
    {
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_PARTITION,
    }
)
"""Errors of an offsets request while a partition's leader is still being elected or made
known: asked again."""

Change = tuple[str, list[int]]
"""("assigned" or "revoked", partitions): a group change not yet handed to the listener."""


def _broker_errors() -> AbstractContextManager[None]:
    return broker_errors(KafkaException)


GroupCallback = Callable[[Any, list[TopicPartition]], None]


def _keep_changes(changes: deque[Change], start: GroupStart) -> tuple[GroupCallback, GroupCallback]:
    """The group callbacks of a subscription: each change kept in `changes` for
    `ConfluentReader.poll`; partitions assigned read from `start`. (Closures over the queue,
    not bound methods: the consumer would keep its reader alive in a cycle.)"""

    def on_assign(consumer: Any, assigned: list[TopicPartition]) -> None:
        if start == "beginning":
            assigned = [TopicPartition(tp.topic, tp.partition, OFFSET_BEGINNING) for tp in assigned]
        consumer.assign(assigned)  # from the committed offsets when no offset is given
        changes.append(("assigned", sorted(tp.partition for tp in assigned)))

    def on_revoke(consumer: Any, revoked: list[TopicPartition]) -> None:
        if revoked:
            changes.append(("revoked", sorted(tp.partition for tp in revoked)))

    return on_assign, on_revoke


class ConfluentReader(RecordReader):
    """`RecordReader` on librdkafka's consumer: no auto-commit, offsets not stored, earliest
    when a partition has no offset. librdkafka calls a group's callbacks inside `poll`; the
    reader hands them to the caller's listener once the batch is in, as the kafka-python
    backend does."""

    def __init__(self, settings: KafkaSettings) -> None:
        with _broker_errors():
            self.consumer = Consumer(
                {
                    **librdkafka_config(settings),
                    "group.id": settings.group_id,
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "auto.offset.reset": "earliest",
                    "partition.assignment.strategy": ",".join(ASSIGNORS),
                }
            )
        self.topic = ""
        self.partitions: list[int] = []
        self.next_offsets: dict[int, int] = {}
        """partition → the next offset to read, once known (read or assigned)."""
        self._changes: deque[Change] = deque()
        self._listener: RebalanceListener | None = None
        self._start: GroupStart = "beginning"

    def assign(
        self,
        topic: str,
        next_offsets: Mapping[int, int],
        partitions: Collection[int] | None = None,
    ) -> list[int]:
        found = self.topic_partitions(topic)
        if not found:
            raise BrokerError(f"topic {topic!r} has no partitions (does it exist?)")
        self.topic = topic
        self.partitions = found if partitions is None else sorted(set(found) & set(partitions))
        self.next_offsets = {p: next_offsets[p] for p in self.partitions if p in next_offsets}
        with _broker_errors():
            self.consumer.assign(
                [
                    TopicPartition(topic, p, self.next_offsets.get(p, OFFSET_BEGINNING))
                    for p in self.partitions
                ]
            )
        return list(self.partitions)

    def subscribe(
        self, topic: str, listener: RebalanceListener, start: GroupStart = "committed"
    ) -> None:
        self.topic = topic
        self._listener = listener
        self._start = start
        on_assign, on_revoke = _keep_changes(self._changes, start)
        with _broker_errors():
            self.consumer.subscribe(
                [topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke
            )

    def poll(self, max_records: int, timeout_ms: int) -> list[KafkaRecord]:
        """What is queued now, up to `max_records`; only when nothing is, a wait of up to
        `timeout_ms` for the first record. (librdkafka's batch call alone would wait the
        whole timeout for `max_records` to arrive: a step would start late under a light
        load.)"""
        with _broker_errors():
            messages = self.consumer.consume(max_records, 0)
            if not messages:
                first = self.consumer.poll(timeout_ms / 1000)
                if first is not None:
                    rest = self.consumer.consume(max_records - 1, 0) if max_records > 1 else []
                    messages = [first, *rest]
        records: list[KafkaRecord] = []
        for m in messages:
            error = m.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise BrokerError(f"reading {self.topic!r}: {error.str()}")
            partition, offset = m.partition(), m.offset()
            if partition is None or offset is None:  # only error events go without them
                raise BrokerError(f"reading {self.topic!r}: a record without a position")
            records.append(KafkaRecord(partition, offset, m.key(), m.value()))
        if self._listener is not None:
            self._hand_over_changes()
            owned = set(self.partitions)
            records = [r for r in records if r.partition in owned]
        if len(self.partitions) > 1:
            records.sort(key=lambda r: r.partition)  # stable: each partition's order kept
        for r in records:
            self.next_offsets[r.partition] = r.offset + 1
        return records

    def _hand_over_changes(self) -> None:
        """The group's changes since the last poll, to the caller's listener, in order."""
        assert self._listener is not None
        while self._changes:
            kind, parts = self._changes.popleft()
            for p in parts:  # read again from the start: positions from there on
                self.next_offsets.pop(p, None)
            if kind == "revoked":
                self.partitions = [p for p in self.partitions if p not in set(parts)]
                self._listener.revoked(parts)
            else:
                self.partitions = list(parts)
                self._listener.assigned(parts)

    def topic_partitions(self, topic: str) -> list[int]:
        with _broker_errors():
            found = self.consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
        if found is None or found.error is not None:
            return []
        return sorted(found.partitions)

    def position(self, partition: int) -> int:
        """The offset after the last record read; before any, where reading starts: the
        offset assigned, the group's committed one, or the partition's first."""
        known = self.next_offsets.get(partition)
        if known is not None:
            return known
        if self._listener is not None and self._start == "committed":
            tp = TopicPartition(self.topic, partition)
            with _broker_errors():
                committed = self.consumer.committed([tp], timeout=METADATA_TIMEOUT_S)[0].offset
            if committed >= 0:
                return int(committed)
        return self._watermarks(partition)[0]

    def end_offsets(self, partitions: Collection[int]) -> dict[int, int]:
        return {p: self._watermarks(p)[1] for p in sorted(partitions)}

    def _watermarks(self, partition: int, cached: bool = False) -> tuple[int, int]:
        """(first offset, end offset) of `partition`, asked again while its leader is not
        known yet (a topic just created) until `METADATA_TIMEOUT_S` has passed."""
        tp = TopicPartition(self.topic, partition)
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        while True:
            try:
                low, high = self.consumer.get_watermark_offsets(
                    tp, timeout=METADATA_TIMEOUT_S, cached=cached
                )
                return int(low), int(high)
            except KafkaException as exc:
                error = exc.args[0]
                transient = error.retriable() or error.code() in LEADER_UNKNOWN
                if not transient or time.monotonic() > deadline:
                    raise BrokerError(f"offsets of {self.topic!r} [{partition}]: {exc}") from exc
            time.sleep(RETRY_S)

    def _lag(self, cached: bool) -> int | None:
        total = 0
        for p in self.partitions:
            low, high = self._watermarks(p, cached)
            position = self.next_offsets.get(p, low)
            if high == OFFSET_INVALID or position == OFFSET_INVALID:
                return None  # not fetched yet: the cache knows nothing
            total += max(0, high - max(position, low if low != OFFSET_INVALID else 0))
        return total

    def lag(self) -> int:
        lag = self._lag(cached=False)
        if lag is None:
            raise BrokerError(f"no watermark offsets for {self.topic!r}")
        return lag

    def lag_estimate(self) -> int:
        lag = self._lag(cached=True)
        return self.lag() if lag is None else lag

    def commit(self, next_offsets: Mapping[int, int]) -> None:
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(next_offsets.items())]
        if offsets:
            with _broker_errors():
                self.consumer.commit(offsets=offsets, asynchronous=False)

    def commit_for_monitoring(self, next_offsets: Mapping[int, int]) -> None:
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(next_offsets.items())]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            log.debug("group offset commit failed (informational only): %s", exc)

    def close(self) -> None:
        """Close the consumer (a group member leaves its group: what that revokes is told to
        nobody)."""
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as exc:  # closed already, or the broker is gone
            log.debug("closing the consumer: %s", exc)


def _keep_errors(failed: list[KafkaError]) -> Callable[[KafkaError | None, object], None]:
    """A delivery callback that keeps the errors it is told of in `failed`."""

    def report(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            failed.append(error)

    return report


class ConfluentWriter(RecordWriter):
    """`RecordWriter` on librdkafka's producer: acks from all replicas, lz4, idempotence
    (retries keep each partition's order: an older upsert never lands after a newer one),
    murmur2 for keys without a partition, a record's delivery given up after the flush
    timeout."""

    def __init__(self, settings: KafkaSettings, flush_timeout_s: float = 30.0) -> None:
        self.flush_timeout_s = flush_timeout_s
        self._failed: list[KafkaError] = []
        with _broker_errors():
            self.producer = Producer(
                {
                    **librdkafka_config(settings),
                    "acks": "all",
                    "linger.ms": 5,
                    "compression.type": "lz4",
                    "enable.idempotence": True,
                    "partitioner": "murmur2_random",
                    "message.timeout.ms": max(1, int(flush_timeout_s * 1000)),
                    "delivery.report.only.error": True,
                    # not a bound method: the producer would then keep its writer alive
                    # (a cycle only the collector frees) and its threads running after close
                    "on_delivery": _keep_errors(self._failed),
                }
            )
        self._partitions: dict[str, int] = {}

    def partitions(self, topic: str) -> int:
        """The topic's partition count, asked again while the broker's metadata does not
        show it yet (a topic just created: unknown, or without a leader) until
        `METADATA_TIMEOUT_S` has passed."""
        count = self._partitions.get(topic)
        if count is not None:
            return count
        deadline = time.monotonic() + METADATA_TIMEOUT_S
        while True:
            with _broker_errors():
                metadata = self.producer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
            found = metadata.topics.get(topic)
            if found is not None and found.error is None and found.partitions:
                count = self._partitions[topic] = len(found.partitions)
                return count
            if time.monotonic() > deadline:
                why = "unknown" if found is None else found.error or "no partitions"
                raise SinkError(f"topic {topic!r} has no partitions ({why})")
            time.sleep(RETRY_S)

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> None:
        self.send_many(topic, [(key, value, -1 if partition is None else partition)])

    def send_many(
        self, topic: str, records: Sequence[tuple[bytes | None, bytes | None, int]]
    ) -> None:
        """Queue (key, value, partition) records (partition -1: by the key)."""
        produce = self.producer.produce
        for key, value, partition in records:
            while True:
                try:
                    produce(topic, value, key, partition)
                    break
                except BufferError:  # the local queue is full: let deliveries make room
                    self.producer.poll(0.05)
                except KafkaException as exc:
                    raise SinkError(f"output not queued: {exc}") from exc

    def flush(self) -> None:
        remaining = self.producer.flush(self.flush_timeout_s)
        failed = list(self._failed)
        self._failed.clear()
        if failed:
            raise SinkError(f"{len(failed)} outputs not written: {failed[0].str()}")
        if remaining:
            raise SinkError(f"{remaining} outputs not acknowledged before the flush timeout")

    def close(self) -> None:
        # Whatever is still queued belongs to a step that will not be committed.
        self.producer.purge()
        self.producer.flush(0)
        # librdkafka's handle lives until the object is collected, and until then it keeps
        # reconnecting to a broker that is gone: let it go now.
        del self.producer


class ConfluentAdmin(TopicAdmin):
    """`TopicAdmin` on librdkafka's admin client."""

    def __init__(self, settings: KafkaSettings) -> None:
        with _broker_errors():
            self.admin = AdminClient(librdkafka_config(settings))

    def topics(self) -> set[str]:
        with _broker_errors():
            return set(self.admin.list_topics(timeout=METADATA_TIMEOUT_S).topics)

    def partitions(self, topic: str) -> int:
        with _broker_errors():
            found = self.admin.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
        return 0 if found is None or found.error is not None else len(found.partitions)

    def create(self, specs: Sequence[TopicSpec]) -> None:
        new = [
            NewTopic(s.name, s.partitions, s.replication_factor, config=dict(s.config))
            for s in specs
        ]
        with _broker_errors():
            futures = self.admin.create_topics(new, request_timeout=METADATA_TIMEOUT_S)
            for future in futures.values():
                try:
                    future.result(timeout=METADATA_TIMEOUT_S * 3)
                except KafkaException as exc:
                    if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise  # made by another meanwhile is not an error; the rest is

    def close(self) -> None:
        del self.admin  # as the writer's: librdkafka's handle goes with the object
