"""The Beam Kafka sink: frontier changes (and URL states) and dead letters to their topics,
each bundle acknowledged by the broker before it ends, records written exactly as the
embedded engine's `KafkaSink` writes them (`connectors.kafka.frontier_records`)."""

from __future__ import annotations

import contextlib
from typing import Any

import apache_beam as beam
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

from frontierflow.connectors.kafka import KafkaSettings, frontier_records, open_writer
from frontierflow.pipelines.beam.coders import UrlUpdate


def ensure_compacted_topic(settings: KafkaSettings, topic: str) -> None:
    """Create `topic` compacted (latest value per key) if it is missing, with the settings'
    partitions and replication: the state topic holds every URL's latest state."""
    admin = KafkaAdminClient(**settings.connection())
    try:
        if topic in set(admin.list_topics()):
            return
        new = NewTopic(
            topic,
            settings.partitions,
            settings.replication_factor,
            topic_configs={"cleanup.policy": "compact"},
        )
        with contextlib.suppress(TopicAlreadyExistsError):  # made by another meanwhile
            admin.create_topics([new])
    finally:
        admin.close()


class _KafkaWriter(beam.DoFn):
    """Sends through the settings' Kafka client (`connectors.kafka.open_writer`: librdkafka's
    when installed); every bundle ends with all its records acknowledged (a failure fails
    the bundle, which the runner retries: the records are upserts by key)."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings

    def setup(self) -> None:
        self.output = open_writer(self.settings)

    def finish_bundle(self) -> None:
        self.output.flush()

    def teardown(self) -> None:
        self.output.close()


class _SendToKafka(_KafkaWriter):
    """(topic, key, value) records to Kafka, by Kafka's default partitioner."""

    def process(self, record: tuple[str, bytes | None, bytes | None]) -> None:
        topic, key, value = record
        self.output.send(topic, key, value)


class _SendUpdates(_KafkaWriter):
    """Per-URL updates to Kafka: every change to the frontier topic exactly as the
    embedded engine's `KafkaSink` writes it (`frontier_records`: key, tombstone, partition
    by host), and with a state topic the URL's state keyed by URL (a tombstone when the key
    holds no state). A bundle's changes are encoded together at its end, in order, as the
    engine encodes a step's (one block of entries instead of one per change)."""

    def __init__(self, settings: KafkaSettings, state_topic: str | None) -> None:
        super().__init__(settings)
        self.state_topic = state_topic

    def start_bundle(self) -> None:
        self.changes: list[Any] = []

    def process(self, update: UrlUpdate) -> None:
        self.changes.extend(update.changes)
        if self.state_topic is not None:
            self.output.send(self.state_topic, update.url.encode(), update.state)

    def finish_bundle(self) -> None:
        if self.changes:
            frontier = self.settings.topics.frontier
            partitions = self.output.partitions(frontier)
            self.output.send_many(frontier, frontier_records(self.changes, partitions))
            self.changes = []
        super().finish_bundle()


class WriteToKafka(beam.PTransform):
    """Writes (topic, key, value) records; a None value is a tombstone."""

    def __init__(self, settings: KafkaSettings) -> None:
        super().__init__()
        self.settings = settings

    def expand(self, records: Any) -> Any:
        return records | "Send" >> beam.ParDo(_SendToKafka(self.settings))


class WriteUpdatesToKafka(beam.PTransform):
    """Writes `UrlUpdate`s: their changes to the frontier topic, and their states to
    `state_topic` when given (`_SendUpdates`)."""

    def __init__(self, settings: KafkaSettings, state_topic: str | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.state_topic = state_topic

    def expand(self, updates: Any) -> Any:
        return updates | "Send" >> beam.ParDo(_SendUpdates(self.settings, self.state_topic))
