"""The kafka-python backend of the Kafka client interface (`connectors.kafka_client`): a
reader by manual assignment, a topic admin, and the producer whose `flush` confirms every
record (the Beam writers use it too). kafka-python's errors come out as `BrokerError`."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from frontierflow.connectors.kafka_client import (
    BrokerError,
    KafkaRecord,
    RecordReader,
    RecordWriter,
    SinkError,
    TopicAdmin,
    TopicSpec,
    broker_errors,
)
from frontierflow.connectors.kafka_settings import KafkaSettings

log = logging.getLogger(__name__)


def _broker_errors() -> contextlib.AbstractContextManager[None]:
    return broker_errors(KafkaError)


class KafkaPythonReader(RecordReader):
    """`RecordReader` on kafka-python's consumer (no auto-commit, earliest on no offset)."""

    def __init__(self, settings: KafkaSettings) -> None:
        with _broker_errors():
            self.consumer = KafkaConsumer(
                group_id=settings.group_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                **settings.connection(),
            )
        self.assigned: list[TopicPartition] = []

    def assign(self, topic: str, next_offsets: Mapping[int, int]) -> list[int]:
        with _broker_errors():
            partitions = self.consumer.partitions_for_topic(topic)
            if not partitions:
                raise BrokerError(f"topic {topic!r} has no partitions (does it exist?)")
            self.assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
            self.consumer.assign(self.assigned)
            for tp in self.assigned:
                if tp.partition in next_offsets:
                    self.consumer.seek(tp, next_offsets[tp.partition])
                else:
                    self.consumer.seek_to_beginning(tp)
        return [tp.partition for tp in self.assigned]

    def poll(self, max_records: int, timeout_ms: int) -> list[KafkaRecord]:
        with _broker_errors():
            batches = self.consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        return [
            KafkaRecord(tp.partition, r.offset, r.key, r.value)
            for tp in sorted(batches, key=lambda t: t.partition)
            for r in batches[tp]
        ]

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

    def commit_for_monitoring(self, next_offsets: Mapping[int, int]) -> None:
        try:
            self.consumer.commit()
        except KafkaError as exc:
            log.debug("group offset commit failed (informational only): %s", exc)

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonAdmin(TopicAdmin):
    """`TopicAdmin` on kafka-python's admin client."""

    def __init__(self, settings: KafkaSettings) -> None:
        with _broker_errors():
            self.admin = KafkaAdminClient(**settings.connection())

    def topics(self) -> set[str]:
        with _broker_errors():
            return set(self.admin.list_topics())

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
        self._partitions: dict[str, int] = {}

    def send(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> None:
        with _broker_errors():
            future = self.producer.send(topic, key=key, value=value, partition=partition)
        self._pending.append(future)

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
