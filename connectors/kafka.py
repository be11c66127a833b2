"""Kafka in and out: the live path between fetchers and frontierflow.

The source reads every partition of `fetch-events` by manual assignment, from offsets the
engine keeps in its own RocksDB checkpoint (the consumer group's commits are written for
monitoring only), and turns records that do not decode into `Failed` items. The sink
writes frontier entries to the compacted `frontier` topic as `frontier_records` makes them
(keyed by URL, or URL and parent for a reply request; a tombstone when a URL is fetched;
partitioned by host), and dead letters to `dead-letter`; `flush` returns only once the
broker has acknowledged everything, so the engine commits state after its outputs are
safe. Both read and write through the interface of `connectors.kafka_client`, with the
library the settings name (`KafkaSettings.client_library`) or the caller: kafka-python
(`connectors.kafka_python`) or confluent-kafka (`connectors.kafka_confluent`); `open_reader`,
`open_writer` and `open_admin` open either for every other Kafka user of the project.
The Beam pipelines' sink writes through `open_writer` too.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from frontierflow.connectors.base import DecisionSink, Failed, Position
from frontierflow.connectors.kafka_client import (
    BrokerError,
    KafkaClientName,
    RecordReader,
    RecordWriter,
    TopicAdmin,
    TopicSpec,
)
from frontierflow.connectors.kafka_python import AcknowledgedProducer as AcknowledgedProducer
from frontierflow.connectors.kafka_python import KafkaPythonAdmin, KafkaPythonReader
from frontierflow.connectors.kafka_settings import CLIENT_SETTINGS as CLIENT_SETTINGS
from frontierflow.connectors.kafka_settings import KafkaSettings as KafkaSettings
from frontierflow.connectors.kafka_settings import KafkaTopics as KafkaTopics
from frontierflow.schemas.codecs import AvroCodec, CodecError, encode_record, record_from_dict
from frontierflow.schemas.entry_blocks import single_object_entries
from frontierflow.schemas.jsonl import json_to_record
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    ScalingDecision,
    SeedRequest,
    frontier_record_key,
)
from frontierflow.state.storage.codec import StateCodecError, decode_positions, encode_positions
from frontierflow.state.urls import host_of, http_host

log = logging.getLogger(__name__)


def job_topics(settings: KafkaSettings) -> list[TopicSpec]:
    """The job's topics as it creates them: `frontier`, `fetcher-control` and `fetched`
    compacted, `fetch-events` stamped on arrival (the Beam form on Flink orders by that)."""
    t = settings.topics
    wanted = [
        # Stamped on arrival: the Beam form's Java source orders events by it.
        (t.fetch_events, {"message.timestamp.type": "LogAppendTime"}),
        (t.frontier, {"cleanup.policy": "compact"}),
        (t.fetcher_control, {"cleanup.policy": "compact"}),
        (t.dead_letter, {}),
        (t.seeds, {}),
        (t.fetched, {"cleanup.policy": "compact"}),
    ]
    return [TopicSpec(n, settings.partitions, settings.replication_factor, c) for n, c in wanted]


def ensure_topics(settings: KafkaSettings, client: KafkaClientName | None = None) -> None:
    """Create the job's topics (`job_topics`) if they are missing, through `client` (None:
    the settings' library)."""
    admin = open_admin(settings, client)
    try:
        existing = admin.topics()
        new = [spec for spec in job_topics(settings) if spec.name not in existing]
        if new:
            admin.create(new)
            log.info("created topics %s", [n.name for n in new])
    finally:
        admin.close()


def ensure_fetched_topic(settings: KafkaSettings) -> None:
    """Create the compacted `fetched` topic, with as many partitions as `frontier`, if it is
    missing (a fetcher may start against a job that predates it). The frontier topic must
    exist: the job creates it (BrokerError otherwise)."""
    admin = open_admin(settings)
    try:
        t = settings.topics
        if t.fetched in admin.topics():
            return
        partitions = admin.partitions(t.frontier)
        if not partitions:
            raise BrokerError(f"topic {t.frontier!r} is missing: start the job first")
        compact = {"cleanup.policy": "compact"}
        admin.create([TopicSpec(t.fetched, partitions, settings.replication_factor, compact)])
    finally:
        admin.close()


_MAX_PARTITION = 2**31 - 1


def host_partition(url: str, partitions: int) -> int:
    """The partition of a frontier (or fetched) record: by the URL's host, so one fetcher of
    a consumer group owns all of a host's URLs and keeps its politeness alone. CRC-32 of the
    lower-cased host name, stable across processes and languages."""
    host = http_host(url) or url
    return zlib.crc32(host.lower().encode()) % partitions


def encode_offsets(offsets: Mapping[int, int]) -> bytes:
    """The source's checkpoint, a position token: partition, next offset to read, for every
    partition in partition order."""
    return encode_positions([n for pair in sorted(offsets.items()) for n in pair])


def decode_offsets(data: bytes | None) -> dict[int, int]:
    """partition → next offset from a checkpoint (None or empty: none); StateCodecError if
    it is not one `encode_offsets` makes."""
    if not data:
        return {}
    numbers = decode_positions(data, "Kafka checkpoint")
    if len(numbers) % 2:
        raise StateCodecError("corrupt Kafka checkpoint: an odd number of positions")
    partitions, offsets = numbers[::2], numbers[1::2]
    if any(p > _MAX_PARTITION for p in partitions) or list(partitions) != sorted(set(partitions)):
        raise StateCodecError(f"corrupt Kafka checkpoint: partitions {list(partitions)}")
    return dict(zip(partitions, offsets, strict=True))


T = TypeVar("T", FetchEvent, SeedRequest)


def decode_fetch_event(value: bytes | None) -> FetchEvent | Failed:
    """A record's value as a FetchEvent: Avro single-object, or a JSON object."""
    return _decode_value(FetchEvent, value, "fetch-events")


def decode_seed(value: bytes | None) -> SeedRequest | Failed:
    """A record's value as a SeedRequest: Avro single-object, or a JSON object."""
    return _decode_value(SeedRequest, value, "seeds")


def _decode_value(kind: type[T], value: bytes | None, topic: str) -> T | Failed:
    if value is None:
        return Failed("CodecError", f"empty value (a tombstone) on the {topic} topic", b"")
    name = kind.__name__
    try:
        if value[:1] == b"{":
            return record_from_dict(kind, json_to_record(value, name))
        return record_from_dict(kind, AvroCodec.for_name(name).decode(value))
    except CodecError as exc:
        return Failed("CodecError", str(exc), value)


class KafkaTopicSource(Generic[T]):
    """Reads one topic, every partition, from the engine's checkpoint on (see the module
    docstring), through `client` (None: the settings' library); subclasses name the topic
    and decode its records."""

    def __init__(
        self,
        settings: KafkaSettings,
        checkpoint: bytes | None,
        client: KafkaClientName | None = None,
    ) -> None:
        self.settings = settings
        self.topic = self._topic(settings)
        self.next_offsets = decode_offsets(checkpoint)
        self.reader = open_reader(settings, client)
        try:
            self.partitions = self.reader.assign(self.topic, self.next_offsets)
        except BaseException:
            self.reader.close()
            raise

    def poll(
        self, max_records: int, timeout_ms: int
    ) -> tuple[list[tuple[Position, T | Failed, bytes]], bytes]:
        """Up to `max_records` items and the checkpoint that follows them."""
        records = self.reader.poll(max_records, timeout_ms)
        decode = self._decode
        items = [
            (Position(partition, offset), decode(value), value or b"")
            for partition, offset, _key, value in records
        ]
        next_offsets = self.next_offsets
        for record in records:
            next_offsets[record.partition] = record.offset + 1
        return items, encode_offsets(next_offsets)

    @staticmethod
    def _topic(settings: KafkaSettings) -> str:
        raise NotImplementedError

    @staticmethod
    def _decode(value: bytes | None) -> T | Failed:
        raise NotImplementedError

    def lag(self) -> int:
        """Records in the topic not yet read (asks the broker for the end offsets)."""
        return self.reader.lag()

    def lag_estimate(self) -> int:
        """Records not yet read as of the last fetch responses (their high-water marks):
        no request to the broker, for a watcher that asks every second; `lag` while a
        partition has had no fetch yet."""
        return self.reader.lag_estimate()

    def commit_for_monitoring(self) -> None:
        """Tell the group where we are (informational: restarts use the checkpoint)."""
        self.reader.commit_for_monitoring(self.next_offsets)

    def close(self) -> None:
        self.reader.close()


class KafkaFetchEventSource(KafkaTopicSource[FetchEvent]):
    """Reads `fetch-events`: (position, FetchEvent or Failed, raw bytes) items."""

    @staticmethod
    def _topic(settings: KafkaSettings) -> str:
        return settings.topics.fetch_events

    @staticmethod
    def _decode(value: bytes | None) -> FetchEvent | Failed:
        return decode_fetch_event(value)


class KafkaSeedSource(KafkaTopicSource[SeedRequest]):
    """Reads the seeds topic from the engine's seeds checkpoint on: (position, SeedRequest
    or Failed, raw bytes) items."""

    @staticmethod
    def _topic(settings: KafkaSettings) -> str:
        return settings.topics.seeds

    @staticmethod
    def _decode(value: bytes | None) -> SeedRequest | Failed:
        return decode_seed(value)


def open_reader(settings: KafkaSettings, client: KafkaClientName | None = None) -> RecordReader:
    """A reader of `client`'s library (None: the settings' `library`)."""
    if (client or settings.library) == "confluent":
        from frontierflow.connectors.kafka_confluent import ConfluentReader

        return ConfluentReader(settings)
    return KafkaPythonReader(settings)


def open_writer(
    settings: KafkaSettings, client: KafkaClientName | None = None, flush_timeout_s: float = 30.0
) -> RecordWriter:
    """A writer of `client`'s library (None: the settings' `library`)."""
    if (client or settings.library) == "confluent":
        from frontierflow.connectors.kafka_confluent import ConfluentWriter

        return ConfluentWriter(settings, flush_timeout_s)
    return AcknowledgedProducer(settings, flush_timeout_s)


def open_admin(settings: KafkaSettings, client: KafkaClientName | None = None) -> TopicAdmin:
    """An admin client of `client`'s library (None: the settings' `library`)."""
    if (client or settings.library) == "confluent":
        from frontierflow.connectors.kafka_confluent import ConfluentAdmin

        return ConfluentAdmin(settings)
    return KafkaPythonAdmin(settings)


def frontier_records(
    changes: Sequence[FrontierChange], partitions: int
) -> list[tuple[bytes, bytes | None, int]]:
    """(key, value, partition) of each frontier change on the frontier topic, the one rule
    for every engine that writes it: the key is `frontier_record_key` (the URL; for a reply
    request the URL and its parent's URL, so compaction keeps each parent's request), the
    value the entry's Avro single-object encoding or None (a tombstone) for a fetched page,
    the partition `host_partition` of the URL, so one fetcher of a group owns a host.

    The entries are encoded as one block (`single_object_entries`: the bytes fastavro
    writes, without a dict and a schema walk per record), and each host's partition is
    worked out once per call (per authority part of the URLs, which names the host; not at
    all for a topic of one partition). The URLs are ones the step core let through (absolute
    http(s)), whose host `host_of` reads without a regular expression."""
    encoded = iter(single_object_entries([c for c in changes if isinstance(c, FrontierEntry)]))
    by_netloc: dict[str, int] = {}  # a URL's host is a function of its authority part
    out: list[tuple[bytes, bytes | None, int]] = []
    append = out.append
    for change in changes:
        url = change.url
        if partitions == 1:  # every host's partition
            partition = 0
        else:
            parts = url.split("/", 3)
            netloc = parts[2] if len(parts) > 2 else url
            found = by_netloc.get(netloc)
            if found is None:
                host = host_of(url)
                found = zlib.crc32((host or url.lower()).encode()) % partitions
                if host:
                    by_netloc[netloc] = found
            partition = found
        key = frontier_record_key(change).encode()
        if isinstance(change, FrontierEntry):
            append((key, next(encoded), partition))
        else:  # a Removal: a tombstone
            append((key, None, partition))
    return out


def decision_record(decision: ScalingDecision) -> tuple[bytes, bytes]:
    """(key, value) of a ScalingDecision on fetcher-control: keyed by its fetcher id, so a
    fetcher reads its own decisions in order (the one rule of the engine and of Beam)."""
    return decision.fetcher_id.encode(), encode_record(decision)


class KafkaSink(DecisionSink):
    """Frontier changes and dead letters to Kafka through `client` (None: the settings'
    library); `flush` waits for every acknowledgement."""

    def __init__(
        self,
        settings: KafkaSettings,
        flush_timeout_s: float = 30.0,
        client: KafkaClientName | None = None,
    ) -> None:
        self.settings = settings
        self.output = open_writer(settings, client, flush_timeout_s)

    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None:
        """Frontier records as `frontier_records` makes them; dead letters unkeyed."""
        topics = self.settings.topics
        partitions = self.output.partitions(topics.frontier)
        self.output.send_many(topics.frontier, frontier_records(changes, partitions))
        for letter in dead:
            self.output.send(topics.dead_letter, None, encode_record(letter))

    def write_decisions(self, decisions: Sequence[ScalingDecision]) -> None:
        topic = self.settings.topics.fetcher_control
        for d in decisions:
            self.output.send(topic, *decision_record(d))

    def flush(self) -> bytes:
        """Wait until the broker acknowledged every record sent; SinkError otherwise."""
        self.output.flush()
        return b""

    def rewind(self, position: bytes | None) -> None:
        """Nothing to cut: outputs are upserts by key, so re-sent ones are harmless."""
        return None

    def close(self) -> None:
        self.output.close()
