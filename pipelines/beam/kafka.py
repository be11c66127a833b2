"""Kafka for the Beam pipelines, with kafka-python: a splittable source and a sink.

`ReadFromKafkaPartitions` is a splittable DoFn over (topic, partition) elements whose
restriction is an offset range: it claims each record's offset before emitting it, so a
runner can checkpoint and split it. Each record is decoded and checked once (`beam.io`):
a valid event leaves as a typed `(position, FetchEvent)`, anything else as a `DeadLetter`
with its partition and offset. A range ends at the offsets given (a replay
of what is in the topic now), or is open (`ends=None`) for unbounded reading, in which case
an idle poll defers the rest of the range instead of busy-waiting.

Event time (`lateness_ms` given): every event is stamped with its `fetched_at`, and each
partition's watermark is the largest `fetched_at` read so far minus `lateness_ms`. An event
whose `fetched_at` is already behind that watermark is too late to be ordered with the
others (the stream form applies messages in event-time order once the watermark passed
them): it becomes a `LateEvent` dead letter with the numbers in its message; one whose
`fetched_at` is more than `MAX_CLOCK_SKEW_MS` after the record's Kafka timestamp would
drag the watermark into the future and becomes a `FutureEvent` dead letter. Undecodable or
invalid records are stamped at the watermark and go to dead letters as ever. Without
`lateness_ms` (the exact-clock pipeline, which orders by position and waits for the end)
the watermark stays put until the range ends and nothing is late.

`WriteUpdatesToKafka` writes per-URL updates to the compacted frontier topic exactly as the
embedded engine's `KafkaSink` does (one rule, `connectors.kafka.frontier_records`: keyed by
URL, or URL and parent for a reply request; tombstones for fetched pages; partitioned by
host), optionally every URL's state to a state topic; `WriteToKafka` sends (topic, key,
value) records such as dead letters. Both end every bundle with all their records
acknowledged. `build_kafka_pipeline` runs the exact-clock pipeline (`beam.replay`),
`build_kafka_stream` the unbounded form (`beam.stream`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import apache_beam as beam
from apache_beam.io.restriction_trackers import OffsetRange, OffsetRestrictionTracker
from apache_beam.io.watermark_estimators import ManualWatermarkEstimator
from apache_beam.transforms.core import RestrictionProvider, WatermarkEstimatorProvider
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import MIN_TIMESTAMP, Duration, Timestamp
from kafka import KafkaConsumer, TopicPartition

from frontierflow.connectors.base import Failed
from frontierflow.connectors.kafka import (
    KafkaSettings,
)
from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.io import DEAD, with_dead_letters
from frontierflow.pipelines.beam.kafka_io import ReadFromKafkaIO, check_log_append_time
from frontierflow.pipelines.beam.kafka_records import (
    checked_record,
    dead_record,
    position_of,
)
from frontierflow.pipelines.beam.kafka_sink import (
    WriteToKafka,
    WriteUpdatesToKafka,
    ensure_compacted_topic,
)
from frontierflow.pipelines.beam.options import pipeline_options, run_pipeline
from frontierflow.pipelines.beam.replay import ReplayFrontier
from frontierflow.pipelines.beam.strategy import beam_strategy
from frontierflow.pipelines.beam.stream import StreamFrontier
from frontierflow.pipelines.beam.stream_speed import SpeedInEventTime, decision_records
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy
from frontierflow.state.revisit_schedule import RevisitPolicy

_MAX_OFFSET = 2**63 - 1


class _OffsetRanges(RestrictionProvider):
    """The restriction of a (topic, partition, start, end) element: its offset range; an
    end of -1 means open (unbounded reading)."""

    def initial_restriction(self, element: tuple[str, int, int, int]) -> OffsetRange:
        _, _, start, end = element
        return OffsetRange(start, _MAX_OFFSET if end < 0 else end)

    def create_tracker(self, restriction: OffsetRange) -> OffsetRestrictionTracker:
        return _PartitionTracker(restriction)

    def restriction_size(self, element: Any, restriction: OffsetRange) -> int:
        return int(min(restriction.size(), 1 << 40))


class _PartitionTracker(OffsetRestrictionTracker):
    """An offset tracker that can be checkpointed but never split in the middle.

    A partition is read in offset order by one reader at a time: its watermark (the largest
    `fetched_at` so far) and so which events are late depend only on the partition's
    contents. A runner's dynamic split would start the rest of the range with the
    watermark of the moment of the split and let through events its first part would
    have found late (seen on Prism). Reading one partition in parallel gains nothing."""

    def try_split(self, fraction_of_remainder: float) -> Any:
        if fraction_of_remainder > 0:
            return None
        return super().try_split(fraction_of_remainder)


class _EventTimeWatermark(WatermarkEstimatorProvider):
    """A manual estimator per partition: `_ReadPartition` sets it from `fetched_at`."""

    def initial_estimator_state(self, element: Any, restriction: Any) -> Timestamp:
        return MIN_TIMESTAMP

    def create_watermark_estimator(self, state: Timestamp) -> Any:
        return ManualWatermarkEstimator(state)


_RANGES = _OffsetRanges()
_WATERMARK = _EventTimeWatermark()


class _ReadPartition(beam.DoFn):
    """Records of one partition as checked events, offsets claimed one by one, stamped
    and late-checked in event time when `lateness_ms` is given (module docstring)."""

    def __init__(self, settings: KafkaSettings, lateness_ms: int | None) -> None:
        self.settings = settings
        self.lateness_ms = lateness_ms

    def setup(self) -> None:
        self.consumer = KafkaConsumer(enable_auto_commit=False, **self.settings.connection())

    def teardown(self) -> None:
        self.consumer.close()

    def process(
        self,
        element: tuple[str, int, int, int],
        tracker: Any = beam.DoFn.RestrictionParam(_RANGES),  # noqa: B008 (Beam's idiom)
        estimator: Any = beam.DoFn.WatermarkEstimatorParam(_WATERMARK),  # noqa: B008
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
                raw = record.value or b""
                item = checked_record(record.value, record.timestamp)
                yield self._stamped(topic, partition, record.offset, item, raw, estimator)

    def _stamped(
        self,
        topic: str,
        partition: int,
        offset: int,
        item: FetchEvent | Failed,
        raw: bytes,
        estimator: Any,
    ) -> Any:
        """A valid event as `(position, event)` at its event time, advancing the watermark;
        an undecodable, invalid or late one as a `DeadLetter` at the watermark."""
        watermark = estimator.current_watermark()
        at_watermark = max(watermark, Timestamp(0))
        if isinstance(item, FetchEvent) and self.lateness_ms is not None:
            stamp = Timestamp(micros=item.fetched_at * 1000)
            if stamp < watermark:
                item = _late(item.fetched_at, watermark, self.lateness_ms)
            else:
                advanced = stamp - Duration(micros=self.lateness_ms * 1000)
                if advanced > watermark:
                    estimator.set_watermark(advanced)
                return TimestampedValue((position_of(partition, offset), item), stamp)
        if isinstance(item, FetchEvent):
            return TimestampedValue((position_of(partition, offset), item), at_watermark)
        letter = item.dead_letter(topic, partition, offset, raw)
        return beam.pvalue.TaggedOutput(DEAD, TimestampedValue(letter, at_watermark))


class _ReadPartitionUnbounded(_ReadPartition):
    """`_ReadPartition` over open ranges: marked unbounded, so the runner streams."""

    @beam.DoFn.unbounded_per_element()
    def process(
        self,
        element: tuple[str, int, int, int],
        tracker: Any = beam.DoFn.RestrictionParam(_RANGES),  # noqa: B008 (Beam's idiom)
        estimator: Any = beam.DoFn.WatermarkEstimatorParam(_WATERMARK),  # noqa: B008
    ) -> Iterator[Any]:
        return super().process(element, tracker, estimator)


LATE_EVENT = "LateEvent"
"""Dead-letter error class of an event already behind the source's watermark."""


def _late(event_ms: int, watermark: Timestamp, lateness_ms: int) -> Failed:
    watermark_ms = watermark.micros // 1000
    message = (
        f"fetched_at {event_ms} is {watermark_ms - event_ms} ms behind the watermark "
        f"{watermark_ms} (allowed lateness {lateness_ms} ms): too late for event-time order"
    )
    return Failed(LATE_EVENT, message, b"")


class ReadFromKafkaPartitions(beam.PTransform):
    """(checked `(position, FetchEvent)`s, `DeadLetter`s) of every partition of the
    fetch-events topic, from `starts` to `ends` (None: unbounded)."""

    def __init__(
        self,
        settings: KafkaSettings,
        starts: Mapping[int, int] | None = None,
        ends: Mapping[int, int] | None = None,
        lateness_ms: int | None = None,
    ) -> None:
        super().__init__()
        if lateness_ms is not None and lateness_ms < 0:
            raise ValueError(f"allowed lateness must be >= 0 ms, got {lateness_ms}")
        self.settings = settings
        self.starts = dict(starts or {})
        self.ends = None if ends is None else dict(ends)
        self.lateness_ms = lateness_ms

    def expand(self, pbegin: Any) -> Any:
        topic = self.settings.topics.fetch_events
        partitions = sorted(self.ends) if self.ends is not None else _partitions(self.settings)
        ends = self.ends or {}
        elements = [(topic, p, self.starts.get(p, 0), ends.get(p, -1)) for p in partitions]
        reader = _ReadPartition if self.ends is not None else _ReadPartitionUnbounded
        read = (
            pbegin
            | "Partitions" >> beam.Create(elements)
            | "ReadPartitions"
            >> beam.ParDo(reader(self.settings, self.lateness_ms)).with_outputs(DEAD, main="events")
        )
        return with_dead_letters(read)


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


def build_kafka_pipeline(
    pipeline: beam.Pipeline,
    settings: KafkaSettings,
    strategy: Strategy[Any],
    ends: Mapping[int, int] | None,
    hosts: HostPolicy | None = DEFAULT_POLICY,
    revisit: RevisitPolicy | None = None,
) -> None:
    """fetch-events → the shared steps → frontier and dead-letter topics (with `revisit`,
    each page's revisit entry too: `beam.revisits`)."""
    t = settings.topics
    events, dead = pipeline | "ReadKafka" >> ReadFromKafkaPartitions(settings, ends=ends)
    updates = events | "Frontier" >> ReplayFrontier(strategy, hosts=hosts, revisit=revisit)
    if revisit is not None:
        updates, _ = updates  # the revisit states: nothing keeps them between runs
    updates | "WriteFrontier" >> WriteUpdatesToKafka(settings)
    letters = dead | "DeadToRecords" >> beam.Map(dead_record, t.dead_letter)
    letters | "WriteDead" >> WriteToKafka(settings)


def build_kafka_stream(
    pipeline: beam.Pipeline,
    settings: KafkaSettings,
    strategy: Strategy[Any],
    windows: ClockWindows,
    ends: Mapping[int, int] | None,
    *,
    lateness_ms: int = 0,
    state_topic: str | None = None,
    kafka_io: str | None = None,
    hosts: HostPolicy | None = DEFAULT_POLICY,
    speed: ControllerSettings | None = None,
    revisit: RevisitPolicy | None = None,
) -> None:
    """fetch-events in event time → the unbounded form (`beam.stream.StreamFrontier`; with
    `revisit`, each page's revisit entry too: `beam.stream_revisits`) → frontier (and
    state) and dead-letter topics; with `speed`, the crawl-speed controller
    (`beam.stream_speed`) → ScalingDecisions on fetcher-control, as the live engine sends
    them. Every URL's changes leave as soon as the watermark passes their clock window;
    only a bound (`ends`) ends the run. With `kafka_io` (an expansion service: `HOST:PORT`
    or its launcher jar) the events come through Java's KafkaIO in arrival time
    (`beam.kafka_io`), without end."""
    t = settings.topics
    read: beam.PTransform
    if kafka_io is not None:
        if ends is not None:
            raise ValueError("the Java Kafka source reads without end: no bounded run")
        read = ReadFromKafkaIO(settings, kafka_io)
    else:
        read = ReadFromKafkaPartitions(settings, ends=ends, lateness_ms=lateness_ms)
    events, dead = pipeline | "ReadKafka" >> read
    by_arrival = kafka_io is not None
    frontier = StreamFrontier(
        strategy, windows, by_arrival=by_arrival, hosts=hosts, revisit=revisit
    )
    parts = events | "Frontier" >> frontier
    (updates,) = parts
    updates | "WriteFrontier" >> WriteUpdatesToKafka(settings, state_topic)
    if speed is not None:
        decisions = events | "Speed" >> SpeedInEventTime(speed, windows, by_arrival)
        decision_records(decisions, t.fetcher_control) | "WriteDecisions" >> WriteToKafka(settings)
    letters = dead | "DeadToRecords" >> beam.Map(dead_record, t.dead_letter)
    letters | "WriteDead" >> WriteToKafka(settings)


def run_beam_kafka(
    settings: KafkaSettings,
    *,
    strategy_name: str,
    budget: int,
    beam_args: list[str],
    until_current_end: bool = True,
    strategy: Strategy[Any] | None = None,
    hosts: HostPolicy | None = DEFAULT_POLICY,
    revisit: RevisitPolicy | None = None,
) -> None:
    """Run the exact-clock Kafka pipeline; with `until_current_end`, over what the topic
    holds now (it waits for its input to end: the clock is one ordered pass)."""
    strategy = beam_strategy(strategy_name, budget=budget, strategy=strategy)
    ends = end_offsets(settings) if until_current_end else None
    run_pipeline(
        pipeline_options(beam_args),
        lambda pipeline: build_kafka_pipeline(pipeline, settings, strategy, ends, hosts, revisit),
    )


FINISH_BUNDLES = "--finish_bundle_before_checkpointing"


def with_finished_bundles(beam_args: list[str]) -> list[str]:
    """`beam_args` with Flink's `--finish_bundle_before_checkpointing`: without it, a
    checkpoint that catches a bundle open loses that bundle's records at the next windowed
    grouping (counted as dropped late data), and a restore from it is not exact
    (`infra/flink/README.md`, "Checkpoints with a Python stage")."""
    return beam_args if FINISH_BUNDLES in beam_args else [*beam_args, FINISH_BUNDLES]


def run_beam_kafka_stream(
    settings: KafkaSettings,
    *,
    strategy_name: str,
    budget: int,
    windows: ClockWindows,
    beam_args: list[str],
    until_current_end: bool = True,
    lateness_ms: int = 0,
    state_topic: str | None = None,
    strategy: Strategy[Any] | None = None,
    kafka_io: str | None = None,
    wait: bool = True,
    hosts: HostPolicy | None = DEFAULT_POLICY,
    speed: ControllerSettings | None = None,
    revisit: RevisitPolicy | None = None,
) -> Any:
    """Run the unbounded form from Kafka to Kafka and wait for it. With
    `until_current_end` the read is bounded to the topic's current end offsets (the run
    then ends once everything read has been applied); otherwise it reads on until the
    runner cancels it (or Flink stops it with a savepoint). `kafka_io`: read through Java's
    KafkaIO (`build_kafka_stream`), the Flink form, always with
    `with_finished_bundles`. `speed`: the crawl-speed controller's settings (None: no
    ScalingDecisions). With `wait=False` it returns the runner's `PipelineResult` as
    soon as the job is submitted."""
    strategy = beam_strategy(strategy_name, budget=budget, strategy=strategy)
    if lateness_ms < 0:
        raise ValueError(f"allowed lateness must be >= 0 ms, got {lateness_ms}")
    if kafka_io is not None:
        if until_current_end or lateness_ms:
            raise ValueError(
                "the Java Kafka source reads without end, in arrival time: "
                "no bounded run and no allowed lateness"
            )
        check_log_append_time(settings)
        beam_args = with_finished_bundles(beam_args)
    if state_topic is not None:
        ensure_compacted_topic(settings, state_topic)
    ends = end_offsets(settings) if until_current_end else None
    return run_pipeline(
        pipeline_options(beam_args),
        lambda pipeline: build_kafka_stream(
            pipeline,
            settings,
            strategy,
            windows,
            ends,
            lateness_ms=lateness_ms,
            state_topic=state_topic,
            kafka_io=kafka_io,
            hosts=hosts,
            speed=speed,
            revisit=revisit,
        ),
        wait=wait,
    )
