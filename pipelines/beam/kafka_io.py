"""Fetch events through Beam's Java KafkaIO: the unbounded form's source on Flink.

Flink's portable runner (every job server that resolves here, up to Beam 2.62) does not
carry a Python splittable DoFn's watermark in streaming mode (apache/beam#19637), so the
Python source of `beam.kafka` never lets a clock window close there. KafkaIO is a Java
source: expanded with Beam's `use_deprecated_read`, Flink runs it as its own unbounded
source, checkpoints its offsets with the job's state and advances its watermark itself.

Event time is then the broker's: the fetch-events topic must stamp records on arrival
(`message.timestamp.type=LogAppendTime`, which `connectors.kafka.ensure_topics` sets on
the topics it creates; `check_log_append_time` refuses a topic without it before a job is
submitted). Within a partition, append time never decreases along the offsets, so no event
can be late and the windows keep the topic's order; KafkaIO holds the watermark at the
slowest partition's last append time (or two seconds before now once a partition has no
backlog, and append times are taken from the broker's clock). The clock windows of the
unbounded form (`beam.stream`) are windows of arrival, not of `fetched_at`: a strategy
still sees each event's own `fetched_at` as its `now`.

The expansion service is Beam's Java `ExpansionService` with KafkaIO on its class path
(`infra/flink/fetch-job-server.sh --kafka-expansion-service` assembles it beside the job
server, which must carry KafkaIO too). The read's configuration names only the fields that
KafkaIO 2.62's `External.Configuration` knows: the Python SDK's own `ReadFromKafka` sends
newer ones that it refuses.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.transforms.external import (
    ExternalTransform,
    JavaJarExpansionService,
    NamedTupleBasedPayloadBuilder,
)
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

from frontierflow.connectors.kafka import KafkaSettings
from frontierflow.pipelines.beam.io import DEAD, with_dead_letters
from frontierflow.pipelines.beam.kafka_records import checked_record, position_of
from frontierflow.schemas.records import FetchEvent

READ_WITH_METADATA = "beam:transform:org.apache.beam:kafka_read_with_metadata:v1"
BYTES = "org.apache.kafka.common.serialization.ByteArrayDeserializer"
LOG_APPEND_TIME = "LogAppendTime"

EXPANSION_ARGS = (
    "{{PORT}}",
    "--javaClassLookupAllowlistFile=*",
    # The Java steps of the read (record → row) run in a Java SDK harness inside Flink's
    # TaskManager; with the deprecated read, KafkaIO itself becomes Flink's own source.
    "--defaultEnvironmentType=EMBEDDED",
    "--experiments=use_deprecated_read",
)


# The fields of KafkaIO 2.62's `Read.External.Configuration` that this read sets, in the
# functional form: Beam infers the payload's schema from the field types, which a class
# body would leave as strings under `from __future__ import annotations`.
_ReadConfiguration = typing.NamedTuple(  # noqa: UP014
    "_ReadConfiguration",
    [
        ("consumer_config", typing.Mapping[str, str]),
        ("topics", typing.List[str]),  # noqa: UP006
        ("key_deserializer", str),
        ("value_deserializer", str),
        ("timestamp_policy", str),
        ("commit_offset_in_finalize", bool),
    ],
)


def expansion_service(where: str) -> Any:
    """A running service (`HOST:PORT`) or the launcher jar to start one from."""
    if where.endswith(".jar"):
        if not Path(where).is_file():
            raise ValueError(f"no Kafka expansion service jar at {where}")
        return JavaJarExpansionService(where, extra_args=list(EXPANSION_ARGS))
    return where


def consumer_config(settings: KafkaSettings) -> dict[str, str]:
    """KafkaIO's consumer settings. No consumer group: a new job has empty state, so it
    reads every partition from its start (what another consumer of the group committed
    does not apply to it); a job restored from a checkpoint or savepoint resumes at the
    offsets stored there, consistent with its state."""
    if settings.client:
        raise ValueError(
            "the Java Kafka source takes no client settings (TLS, SASL) yet: "
            f"got {sorted(settings.client)}"
        )
    return {
        "bootstrap.servers": settings.bootstrap_servers,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
    }


def kafka_io_records(pbegin: Any, consumer: dict[str, str], topics: list[str], service: str) -> Any:
    """The records of `topics`, with their metadata, as KafkaIO reads them through the
    expansion service at `service`: keys and values as bytes, each stamped with the
    broker's append time, offsets not committed back (the job's checkpoints hold them)."""
    configuration = _ReadConfiguration(
        consumer_config=consumer,
        topics=topics,
        key_deserializer=BYTES,
        value_deserializer=BYTES,
        timestamp_policy=LOG_APPEND_TIME,
        commit_offset_in_finalize=False,
    )
    return pbegin | "KafkaIO" >> ExternalTransform(
        READ_WITH_METADATA,
        NamedTupleBasedPayloadBuilder(configuration),
        expansion_service(service),
    )


class ReadFromKafkaIO(beam.PTransform):
    """(checked `(position, FetchEvent)`s at their arrival time, `DeadLetter`s) of every
    partition of the fetch-events topic, read on without end by KafkaIO."""

    def __init__(self, settings: KafkaSettings, service: str) -> None:
        super().__init__()
        self.settings = settings
        self.service = service

    def expand(self, pbegin: Any) -> Any:
        records = kafka_io_records(
            pbegin,
            consumer_config(self.settings),
            [self.settings.topics.fetch_events],
            self.service,
        )
        decoded = records | "Decode" >> beam.ParDo(_DecodeRecord()).with_outputs(
            DEAD, main="events"
        )
        return with_dead_letters(decoded)


class _DecodeRecord(beam.DoFn):
    """A KafkaIO row as the Python source's outputs: a checked event at the row's own time
    (its append time) or a dead letter with the reason and the raw bytes."""

    def process(self, row: Any) -> Iterator[Any]:
        item = record_item(row.topic, row.partition, row.offset, row.value, row.timestamp)
        if item is not None:
            yield item


def record_item(
    topic: str, partition: int, offset: int, value: bytes | None, record_ms: int
) -> Any:
    raw = value or b""
    item = checked_record(value, record_ms)
    if isinstance(item, FetchEvent):
        return (position_of(partition, offset), item)
    return beam.pvalue.TaggedOutput(DEAD, item.dead_letter(topic, partition, offset, raw))


def check_log_append_time(settings: KafkaSettings) -> None:
    """Refuse a fetch-events topic that keeps its producers' timestamps: KafkaIO's
    arrival-time policy fails the job on the first such record."""
    topic = settings.topics.fetch_events
    admin = KafkaAdminClient(**settings.connection())
    try:
        response = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        admin.close()
    value = _config_value(response, "message.timestamp.type")
    if value != LOG_APPEND_TIME:
        raise ValueError(
            f"topic {topic!r} has message.timestamp.type={value or 'the broker default'}: "
            "the Java Kafka source "
            "orders events by their arrival, so the topic must stamp them on arrival — "
            f"set message.timestamp.type={LOG_APPEND_TIME} on it (kafka-configs.sh --alter "
            "--entity-type topics --add-config …), or let the job create the topic"
        )


def _config_value(response: Any, name: str) -> str | None:
    """A topic setting from `describe_configs` (kafka-python's dict form: topic → name →
    fields; a setting left at the broker's default may be missing)."""
    for topics in (response or {}).values():
        for settings in topics.values():
            entry = settings.get(name)
            if entry is not None:
                return str(entry.get("value"))
    return None
