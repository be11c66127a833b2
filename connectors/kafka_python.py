"""The kafka-python backend of the Kafka client interface (`connectors.kafka_client`): a
reader by manual assignment or as a group member, a topic admin, and the producer whose
`flush` confirms every record (the Beam writers use it too). kafka-python's errors come out
as `BrokerError`.

kafka-python calls a group's rebalance listener on its own IO thread, while the thread that
polls waits; the reader keeps what it is told there (and seeks, which only marks the
partitions) and hands it to the caller's `RebalanceListener` when `poll` returns, on the
caller's thread, as confluent-kafka does.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import KafkaError, TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata

from frontierflow.connectors.kafka_client import (
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

log = logging.getLogger(__name__)

Change = tuple[str, list[int]]
"""("assigned" or "revoked", partitions): a group change not yet handed to the listener."""


PRUNE_AT = 10_000
"""Records a writer keeps before it forgets the ones acknowledged already."""


def _broker_errors() -> contextlib.AbstractContextManager[None]:
    return broker_errors(KafkaError)


class _GroupChanges(ConsumerRebalanceListener):
    """kafka-python's listener: seeks newly assigned partitions to `start` and keeps every
    change in `changes` for `KafkaPythonReader.poll`. Runs on kafka-python's IO thread."""

    def __init__(self, consumer: KafkaConsumer, start: GroupStart) -> None:
        self.consumer = consumer
        self.start = start
        self.changes: deque[Change] = deque()

    def on_partitions_revoked(self, revoked: Any) -> None:
        if revoked:  # kafka-python also calls it with none before a first assignment
            self.changes.append(("revoked", sorted(tp.partition for tp in revoked)))

    def on_partitions_lost(self, lost: Any) -> None:
        self.on_partitions_revoked(lost)

    def on_partitions_assigned(self, assigned: Any) -> None:
        if assigned and self.start == "beginning":
            self.consumer.seek_to_beginning(*assigned)  # marks them; fetched later
        self.changes.append(("assigned", sorted(tp.partition for tp in assigned)))


class KafkaPythonReader(RecordReader):
    """`RecordReader` on kafka-python's consumer (no auto-commit, earliest on no offset)."""

    def __init__(self, settings: KafkaSettings) -> None:
        with _broker_errors():
            self.consumer = KafkaConsumer(
                group_id=settings.group_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                partition_assignment_strategy=(RangePartitionAssignor, RoundRobinPartitionAssignor),
                **settings.connection(),
            )
        self.topic = ""
        self.assigned: list[TopicPartition] = []
        self._group: _GroupChanges | None = None
        self._listener: RebalanceListener | None = None

    def assign(
        self,
        topic: str,
        next_offsets: Mapping[int, int],
        partitions: Collection[int] | None = None,
    ) -> list[int]:
        with _broker_errors():
            found = self.consumer.partitions_for_topic(topic)
            if not found:
                raise BrokerError(f"topic {topic!r} has no partitions (does it exist?)")
            wanted = found if partitions is None else found & set(partitions)
            self.topic = topic
            self.assigned = [TopicPartition(topic, p) for p in sorted(wanted)]
            self.consumer.assign(self.assigned)
            for tp in self.assigned:
                if tp.partition in next_offsets:
                    self.consumer.seek(tp, next_offsets[tp.partition])
                else:
                    self.consumer.seek_to_beginning(tp)
        return [tp.partition for tp in self.assigned]

    def subscribe(
        self, topic: str, listener: RebalanceListener, start: GroupStart = "committed"
    ) -> None:
        self.topic = topic
        self._listener = listener
        self._group = _GroupChanges(self.consumer, start)
        with _broker_errors():
            self.consumer.subscribe([topic], listener=self._group)

    def poll(self, max_records: int, timeout_ms: int) -> list[KafkaRecord]:
        with _broker_errors():
            batches = self.consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        if self._group is not None:
            self._hand_over_changes()
            owned = set(self.assigned)
            batches = {tp: recs for tp, recs in batches.items() if tp in owned}
        return [
            KafkaRecord(tp.partition, r.offset, r.key, r.value)
            for tp in sorted(batches, key=lambda t: t.partition)
            for r in batches[tp]
        ]

    def _hand_over_changes(self) -> None:
        """The group's changes since the last poll, to the caller's listener, in order."""
        assert self._group is not None and self._listener is not None
        changes = self._group.changes
        while changes:
            kind, parts = changes.popleft()
            if kind == "revoked":
                gone = set(parts)
                self.assigned = [tp for tp in self.assigned if tp.partition not in gone]
                self._listener.revoked(parts)
            else:
                self.assigned = [TopicPartition(self.topic, p) for p in parts]
                self._listener.assigned(parts)

    def topic_partitions(self, topic: str) -> list[int]:
        with _broker_errors():
            return sorted(self.consumer.partitions_for_topic(topic) or ())

    def position(self, partition: int) -> int:
        with _broker_errors():
            found = self.consumer.position(TopicPartition(self.topic, partition))
        if found is None:
            raise BrokerError(f"no position for {self.topic!r} partition {partition}")
        return int(found)

    def end_offsets(self, partitions: Collection[int]) -> dict[int, int]:
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        if not tps:
            return {}
        with _broker_errors():
            ends = self.consumer.end_offsets(tps)
        return {tp.partition: end for tp, end in ends.items()}

    def lag(self) -> int:
        with _broker_errors():
            ends = self.consumer.end_offsets(self.assigned)
            return sum(max(0, end - self.consumer.position(tp)) for tp, end in ends.items())

    def lag_estimate(self) -> int:
        total = 0
        with _broker_errors():
            for tp in self.assigned:
                high = self.consumer.highwater(tp)
                if high is None:
                    return self.lag()
                total += max(0, high - self.consumer.position(tp))
        return total

    def commit(self, next_offsets: Mapping[int, int]) -> None:
        offsets = {
            TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1)
            for p, o in next_offsets.items()
        }
        if offsets:
            with _broker_errors():
                self.consumer.commit(offsets)

    def commit_for_monitoring(self, next_offsets: Mapping[int, int]) -> None:
        """The consumed positions to the group, without waiting for the broker's answer (a
        round trip per step otherwise); a failure is only logged."""
        try:
            self.consumer.commit_async(callback=_log_failed_commit)
        except KafkaError as exc:
            log.debug("group offset commit failed (informational only): %s", exc)

    def close(self) -> None:
        self.consumer.close()  # what the group takes from it now is told to nobody


def _log_failed_commit(offsets: object, response: object) -> None:
    if isinstance(response, Exception):
        log.debug("group offset commit failed (informational only): %s", response)


class KafkaPythonAdmin(TopicAdmin):
    """`TopicAdmin` on kafka-python's admin client."""

    def __init__(self, settings: KafkaSettings) -> None:
        with _broker_errors():
            self.admin = KafkaAdminClient(**settings.connection())

    def topics(self) -> set[str]:
        with _broker_errors():
            return set(self.admin.list_topics())

    def partitions(self, topic: str) -> int:
        with _broker_errors():
            described = self.admin.describe_topics([topic])
        return len(described[0]["partitions"] or ()) if described else 0

    def create(self, specs: Sequence[TopicSpec]) -> None:
        new = [
            NewTopic(s.name, s.partitions, s.replication_factor, topic_configs=dict(s.config))
            for s in specs
        ]
        with _broker_errors(), contextlib.suppress(TopicAlreadyExistsError):
            self.admin.create_topics(new)  # one made by another meanwhile is not an error

    def close(self) -> None:
        self.admin.close()


class AcknowledgedProducer(RecordWriter):
    """The kafka-python `RecordWriter`, also what the Beam pipelines' Kafka writers use:
    acks from all replicas, lz4, and a `flush` that returns only once the broker
    acknowledged every record sent since the last one, raising SinkError otherwise, so the
    caller commits (or ends a bundle) only when its outputs are safe."""

    def __init__(self, settings: KafkaSettings, flush_timeout_s: float = 30.0) -> None:
        self.flush_timeout_s = flush_timeout_s
        with _broker_errors():
            self.producer = KafkaProducer(
                acks="all",
                linger_ms=5,
                compression_type="lz4",
                **settings.connection(),
            )
        self._pending: list[Any] = []
        self._prune_at = PRUNE_AT
        self._partitions: dict[str, int] = {}

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> None:
        with _broker_errors():
            future = self.producer.send(topic, key=key, value=value, partition=partition)
        self._pending.append(future)
        if len(self._pending) >= self._prune_at:
            self._prune()

    def _prune(self) -> None:
        """Forget the records acknowledged already, so a writer that flushes rarely (a
        fetcher flushes when it stops) keeps only those still in flight or failed."""
        self._pending = [f for f in self._pending if not f.is_done or f.failed()]
        self._prune_at = max(PRUNE_AT, 2 * len(self._pending))

    def partitions(self, topic: str) -> int:
        """How many partitions `topic` has (asked once, then remembered)."""
        count = self._partitions.get(topic)
        if count is None:
            with _broker_errors():
                found = self.producer.partitions_for(topic)
            if not found:
                raise SinkError(f"topic {topic!r} has no partitions")
            count = self._partitions[topic] = len(found)
        return count

    def flush(self) -> None:
        """Wait until the broker acknowledged every record sent; SinkError otherwise."""
        pending, self._pending = self._pending, []
        try:
            self.producer.flush(timeout=self.flush_timeout_s)
        except KafkaError as exc:
            raise SinkError(f"outputs not acknowledged: {exc}") from exc
        for future in pending:
            if not future.is_done:
                raise SinkError("outputs not acknowledged before the flush timeout")
            if future.failed():
                raise SinkError(f"output not written: {future.exception}")

    def close(self) -> None:
        self.producer.close(timeout=5)
