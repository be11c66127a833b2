"""A recorded two-cycle LAFC crawl and the frontier topic read back per partition: what
the streaming-form tests compare between the live embedded engine and Beam (on Prism and
on the Flink cluster)."""

from __future__ import annotations

import dataclasses

from kafka import KafkaConsumer, TopicPartition
from topical_webs import random_web

from frontierflow.connectors.kafka import KafkaSettings
from frontierflow.pipelines.beam.kafka_sink import ensure_compacted_topic
from frontierflow.pipelines.evaluation.simulator import simulate_cycles
from frontierflow.pipelines.strategies.lafc import Lafc, LafcSettings
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.relevance import Topic

TOPIC = "tcp:2,socket:1"
FRONTIER_PARTITIONS = 4


def lafc() -> Lafc:
    return Lafc(Topic.parse(TOPIC), LafcSettings(control_threshold=0.3, seed=3))


def recorded_crawl() -> list[FetchEvent]:
    """Two cycles of a simulated LAFC crawl: reply requests, answers without download
    (208) and tombstones all occur."""
    events: list[FetchEvent] = []
    simulate_cycles(random_web(120, 5), lafc(), [0], 60, 2, crawl_id="live", on_event=events.append)
    return events


def frontier_per_partition(settings: KafkaSettings) -> dict[int, dict[bytes, bytes | None]]:
    """The frontier topic, partition by partition: every key written, with its latest value
    (None: a tombstone)."""
    topic = settings.topics.frontier
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers, enable_auto_commit=False)
    try:
        out: dict[int, dict[bytes, bytes | None]] = {}
        for p in sorted(consumer.partitions_for_topic(topic) or ()):
            tp = TopicPartition(topic, p)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            end = consumer.end_offsets([tp])[tp]
            latest: dict[bytes, bytes | None] = {}
            while consumer.position(tp) < end:
                for records in consumer.poll(timeout_ms=500).values():
                    latest.update((r.key, r.value) for r in records)
            out[p] = latest
        return out
    finally:
        consumer.close()


def engine_and_beam_settings(engine: KafkaSettings) -> tuple[KafkaSettings, KafkaSettings]:
    """The live engine's settings and the Beam job's: the same fetch-events topic, each its
    own frontier topic of `FRONTIER_PARTITIONS` partitions, both created here."""
    beam_side = dataclasses.replace(
        engine, topics=dataclasses.replace(engine.topics, frontier=engine.topics.frontier + "-b")
    )
    for settings in (engine, beam_side):
        wide = dataclasses.replace(settings, partitions=FRONTIER_PARTITIONS)
        ensure_compacted_topic(wide, settings.topics.frontier)
    return engine, beam_side
