"""Kafka for the Beam pipeline, with kafka-python: a splittable source and a sink.

`ReadFromKafkaPartitions` is a splittable DoFn over (topic, partition) elements whose
restriction is an offset range: it claims each record's offset before emitting it, so a
runner can checkpoint and split it, timestamps elements with the event time carried in the
record (`fetched_at`, else the record's Kafka timestamp) and estimates the watermark from
those timestamps. A range ends at the offsets given (a replay of what is in the topic now),
or is open (`end=None`) for unbounded reading, in which case an idle poll defers the rest
of the range instead of busy-waiting. `WriteFrontierToKafka` sends frontier changes keyed
by URL (tombstones for fetched pages) and flushes at the end of every bundle.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import MonotonicWatermarkEstimator
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.core import RestrictionProvider, WatermarkEstimatorProvider
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import MIN_TIMESTAMP, Duration, Timestamp
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from frontierflow.connectors.kafka import KafkaSettings, decode_fetch_event
from frontierflow.pipelines.beam_replay import TOMBSTONE, event_bytes, update_frontier
from frontierflow.pipelines.engine import Failed
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.strategies.base import Strategy
from frontierflow.schemas.codecs import AvroCodec, json_to_record

_MAX_OFFSET = 2**63 - 1


class _OffsetRanges(RestrictionProvider):
    """The restriction of a (topic, partition, start, end) element: its offset range; an
    end of -1 means open (unbounded reading)."""

    def initial_restriction(self, element: tuple[str, int, int, int]) -> OffsetRange:
        _, _, start, end = element
        return OffsetRange(start, _MAX_OFFSET if end < 0 else end)

    def create_tracker(self, restriction: OffsetRange) -> OffsetRestrictionTracker:
        return OffsetRestrictionTracker(restriction)

    def restriction_size(self, element: Any, restriction: OffsetRange) -> int:
        return int(min(restriction.size(), 1 << 40))


class _EventTimeWatermark(WatermarkEstimatorProvider):
    def initial_estimator_state(self, element: Any, restriction: Any) -> Timestamp:
        return MIN_TIMESTAMP

    def create_watermark_estimator(self, state: Timestamp) -> Any:
        return MonotonicWatermarkEstimator(state)


_RANGES = _OffsetRanges()
_WATERMARK = _EventTimeWatermark()


class _ReadPartition(beam.DoFn):
    """Records of one partition as (partition, offset, value), offsets claimed one by one."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings

    def setup(self) -> None:
        self.consumer = KafkaConsumer(enable_auto_commit=False, **self.settings.connection())

    def teardown(self) -> None:
        self.consumer.close()

    def process(
        self,
        element: tuple[str, int, int, int],
        tracker: Any = beam.DoFn.RestrictionParam(_RANGES),  # noqa: B008 (Beam's idiom)
        _estimator: Any = beam.DoFn.WatermarkEstimatorParam(_WATERMARK),  # noqa: B008
    ) -> Iterator[Any]:
        topic, partition, _, _ = element
        tp = TopicPartition(topic, partition)
        self.consumer.assign([tp])
        restriction = tracker.current_restriction()
        self.consumer.seek(tp, restriction.start)
        while True:
            polled = self.consumer.poll(timeout_ms=500, max_records=500).get(tp, [])
            if not polled:
                if restriction.stop == _MAX_OFFSET:
                    tracker.defer_remainder(Duration.of(1))  # idle: resume in a second
                    return
                if self.consumer.position(tp) >= restriction.stop:
                    tracker.try_claim(restriction.stop)  # past the end: done
                    return
                continue
            for record in polled:
                if not tracker.try_claim(record.offset):
                    return
                seconds = max(record.timestamp, 0) / 1000
                yield TimestampedValue((partition, record.offset, record.value or b""), seconds)


class ReadFromKafkaPartitions(beam.PTransform):
    """Every partition of the fetch-events topic, from `starts` to `ends` (None: unbounded)."""

    def __init__(
        self,
        settings: KafkaSettings,
        starts: Mapping[int, int] | None = None,
        ends: Mapping[int, int] | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.starts = dict(starts or {})
        self.ends = None if ends is None else dict(ends)

    def expand(self, pbegin: Any) -> Any:
        topic = self.settings.topics.fetch_events
        partitions = sorted(self.ends) if self.ends is not None else _partitions(self.settings)
        ends = self.ends or {}
        elements = [(topic, p, self.starts.get(p, 0), ends.get(p, -1)) for p in partitions]
        return (
            pbegin
            | "Partitions" >> beam.Create(elements)
            | "ReadPartitions" >> beam.ParDo(_ReadPartition(self.settings))
        )


def _partitions(settings: KafkaSettings) -> list[int]:
    consumer = KafkaConsumer(**settings.connection())
    try:
        return sorted(consumer.partitions_for_topic(settings.topics.fetch_events) or ())
    finally:
        consumer.close()


def end_offsets(settings: KafkaSettings) -> dict[int, int]:
    """The current end offset of every fetch-events partition: the end of a replay."""
    consumer = KafkaConsumer(**settings.connection())
    try:
        topic = settings.topics.fetch_events
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return {tp.partition: off for tp, off in consumer.end_offsets(parts).items()}
    finally:
        consumer.close()


class _SendToKafka(beam.DoFn):
    """(topic, key, value) records to Kafka; every bundle ends with all of them acknowledged."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings

    def setup(self) -> None:
        self.producer = KafkaProducer(acks="all", linger_ms=5, **self.settings.connection())

    def process(self, record: tuple[str, bytes | None, bytes | None]) -> None:
        topic, key, value = record
        self.producer.send(topic, key=key, value=value)

    def finish_bundle(self) -> None:
        self.producer.flush()

    def teardown(self) -> None:
        self.producer.close(timeout=5)


class WriteToKafka(beam.PTransform):
    """Writes (topic, key, value) records; a None value is a tombstone."""

    def __init__(self, settings: KafkaSettings) -> None:
        super().__init__()
        self.settings = settings

    def expand(self, records: Any) -> Any:
        return records | "Send" >> beam.ParDo(_SendToKafka(self.settings))


def _positioned(record: tuple[int, int, bytes]) -> tuple[int, Any, bytes]:
    """A Kafka record as a positioned item of the shared pipeline steps. Positions order
    records by offset, then partition: with one partition, exactly the topic's order."""
    partition, offset, value = record
    event = decode_fetch_event(value or None)
    position = offset * _PARTITION_SLOTS + partition
    if isinstance(event, Failed):
        return position, (event.error_class, event.message.encode()), value
    return position, event_bytes(event), value


_PARTITION_SLOTS = 1 << 12


def _to_records(
    result: tuple[str, bytes | None, str | None], topic: str
) -> Iterator[tuple[str, bytes | None, bytes | None]]:
    url, _, latest = result
    if latest is None:
        return
    if latest == TOMBSTONE:
        yield topic, url.encode(), None
    else:
        entry = json_to_record(latest, "FrontierEntry")
        yield topic, url.encode(), AvroCodec.for_name("FrontierEntry").encode(entry)


def _dead_record(letter_json: str, topic: str) -> tuple[str, bytes | None, bytes | None]:
    letter = json_to_record(letter_json, "DeadLetter")
    return topic, None, AvroCodec.for_name("DeadLetter").encode(letter)


def build_kafka_pipeline(
    pipeline: beam.Pipeline,
    settings: KafkaSettings,
    strategy: Strategy[Any],
    ends: Mapping[int, int] | None,
) -> None:
    """fetch-events → the shared steps → frontier and dead-letter topics."""
    t = settings.topics
    records = pipeline | "ReadKafka" >> ReadFromKafkaPartitions(settings, ends=ends)
    items = records | "Position" >> beam.Map(_positioned)
    results, dead = update_frontier(items, strategy, t.fetch_events)
    out = results | "ToRecords" >> beam.FlatMap(_to_records, t.frontier)
    letters = dead | "DeadToRecords" >> beam.Map(_dead_record, t.dead_letter)
    (out, letters) | "Merge" >> beam.Flatten() | "WriteKafka" >> WriteToKafka(settings)


def run_beam_kafka(
    settings: KafkaSettings,
    *,
    strategy_name: str,
    budget: int,
    beam_args: list[str],
    until_current_end: bool = True,
) -> None:
    """Run the Kafka pipeline; with `until_current_end`, over what the topic holds now."""
    strategy = build_strategy(strategy_name, budget=budget)
    ends = end_offsets(settings) if until_current_end else None
    with beam.Pipeline(options=PipelineOptions(beam_args)) as pipeline:
        build_kafka_pipeline(pipeline, settings, strategy, ends)
