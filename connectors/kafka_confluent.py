"""The librdkafka backend of the Kafka client interface, through confluent-kafka.

The same guarantees as the kafka-python backend (`connectors.kafka_python`): the reader assigns
partitions by hand from the caller's offsets and commits to the group for monitoring only;
the writer sends with acks from all replicas, lz4 and idempotence, partitions keyed records
without an explicit partition by murmur2 as Kafka's Java client and kafka-python do, and its
`flush` raises SinkError unless the broker acknowledged every record. Connection settings
arrive in kafka-python's names (`CLIENT_SETTINGS`) and are mapped to librdkafka's by
`librdkafka_config`; a setting with no librdkafka equivalent is refused, never dropped.
librdkafka reports successful deliveries to nobody (`delivery.report.only.error`): a
Python call per acknowledged record is the cost this backend exists to avoid.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
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

LIBRDKAFKA_NAMES: Mapping[str, str] = {
    "security_protocol": "security.protocol",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_crlfile": "ssl.crl.location",
    "ssl_ciphers": "ssl.cipher.suites",
    "sasl_mechanism": "sasl.mechanism",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "sasl_kerberos_service_name": "sasl.kerberos.service.name",
    "client_id": "client.id",
    # kafka-python's timeout of one request; librdkafka's default timeout of network requests
    "request_timeout_ms": "socket.timeout.ms",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "retry_backoff_ms": "retry.backoff.ms",
}
"""kafka-python's connection settings and librdkafka's names for the same thing."""

NO_LIBRDKAFKA_EQUIVALENT: Mapping[str, str] = {
    "ssl_context": "librdkafka builds its own TLS context: give ssl_cafile, ssl_certfile, "
    "ssl_keyfile and ssl_password instead",
    "sasl_kerberos_domain_name": "librdkafka takes the Kerberos principal's host from the "
    "broker's address",
    "sasl_oauth_token_provider": "confluent-kafka takes an oauth_cb callback, not a "
    "kafka-python token provider",
    "api_version": "librdkafka asks the broker which protocol versions it speaks",
}
"""Settings kafka-python takes that librdkafka cannot, and why."""

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}

METADATA_TIMEOUT_S = 10.0
"""How long a metadata or watermark request may take before it counts as a broker error."""


def librdkafka_config(settings: KafkaSettings) -> dict[str, Any]:
    """The connection part of a librdkafka configuration for `settings`: the bootstrap
    servers and `settings.client` under librdkafka's names. ValueError for a setting with
    no librdkafka equivalent (`NO_LIBRDKAFKA_EQUIVALENT`), naming it and the way out."""
    config: dict[str, Any] = {"bootstrap.servers": settings.bootstrap_servers}
    for name, value in settings.client.items():
        if name in NO_LIBRDKAFKA_EQUIVALENT:
            raise ValueError(
                f"Kafka client setting {name!r} has no librdkafka equivalent "
                f"({NO_LIBRDKAFKA_EQUIVALENT[name]}); or run with --kafka-client kafka-python"
            )
        if name == "ssl_check_hostname":
            check = _flag(name, value)
            config["ssl.endpoint.identification.algorithm"] = "https" if check else "none"
        elif name in LIBRDKAFKA_NAMES:
            config[LIBRDKAFKA_NAMES[name]] = value
        else:  # KafkaSettings refuses these already; a setting added there lands here
            raise ValueError(f"Kafka client setting {name!r} has no librdkafka mapping")
    return config


def _flag(name: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"Kafka client setting {name!r} takes true or false, got {value!r}")


def _broker_errors() -> AbstractContextManager[None]:
    return broker_errors(KafkaException)


class ConfluentReader(RecordReader):
    """`RecordReader` on librdkafka's consumer: no auto-commit, offsets not stored, earliest
    when a partition has no offset."""

    def __init__(self, settings: KafkaSettings) -> None:
        with _broker_errors():
            self.consumer = Consumer(
                {
                    **librdkafka_config(settings),
                    "group.id": settings.group_id,
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "auto.offset.reset": "earliest",
                }
            )
        self.topic = ""
        self.partitions: list[int] = []
        self.next_offsets: dict[int, int] = {}
        """partition → the next offset to read, once known (read or assigned)."""

    def assign(self, topic: str, next_offsets: Mapping[int, int]) -> list[int]:
        with _broker_errors():
            found = self.consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S).topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                raise BrokerError(f"topic {topic!r} has no partitions (does it exist?)")
            self.topic = topic
            self.partitions = sorted(found.partitions)
            self.next_offsets = {p: next_offsets[p] for p in self.partitions if p in next_offsets}
            self.consumer.assign(
                [
                    TopicPartition(topic, p, self.next_offsets.get(p, OFFSET_BEGINNING))
                    for p in self.partitions
                ]
            )
        return list(self.partitions)

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
        if len(self.partitions) > 1:
            records.sort(key=lambda r: r.partition)  # stable: each partition's order kept
        for r in records:
            self.next_offsets[r.partition] = r.offset + 1
        return records

    def _lag(self, cached: bool) -> int | None:
        total = 0
        for p in self.partitions:
            with _broker_errors():
                low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), timeout=METADATA_TIMEOUT_S, cached=cached
                )
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

    def commit_for_monitoring(self, next_offsets: Mapping[int, int]) -> None:
        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(next_offsets.items())]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            log.debug("group offset commit failed (informational only): %s", exc)

    def close(self) -> None:
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
        count = self._partitions.get(topic)
        if count is None:
            with _broker_errors():
                metadata = self.producer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
            found = metadata.topics.get(topic)
            if found is None or found.error is not None or not found.partitions:
                raise SinkError(f"topic {topic!r} has no partitions")
            count = self._partitions[topic] = len(found.partitions)
        return count

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


class ConfluentAdmin(TopicAdmin):
    """`TopicAdmin` on librdkafka's admin client."""

    def __init__(self, settings: KafkaSettings) -> None:
        with _broker_errors():
            self.admin = AdminClient(librdkafka_config(settings))

    def topics(self) -> set[str]:
        with _broker_errors():
            return set(self.admin.list_topics(timeout=METADATA_TIMEOUT_S).topics)

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
        return None  # the admin client holds nothing to release
