"""A recorded two-cycle LAFC crawl and the frontier topic read back per partition: what
the streaming-form tests compare between the live embedded engine and Beam (on Prism and
on the Flink cluster)."""

from __future__ import annotations

import dataclasses

from kafka import KafkaConsumer, TopicPartition
from topical_webs import random_web

from frontierflow.connectors.kafka import KafkaSettings, ensure_topics
from frontierflow.pipelines.beam.kafka_sink import ensure_compacted_topic
from frontierflow.pipelines.evaluation.simulator import simulate_cycles
from frontierflow.pipelines.speed.settings import settings_for
from frontierflow.pipelines.strategies.lafc import Lafc, LafcSettings
from frontierflow.schemas.codecs import decode_record
from frontierflow.schemas.records import FetchEvent, ScalingDecision
from frontierflow.state.relevance import Topic

TOPIC = "tcp:2,socket:1"
FRONTIER_PARTITIONS = 4
SPEED = settings_for("hypothesis", window_ms=20)
"""Speed windows of 20 ms: the recording's pages are fetched 1 ms apart from 2 to 169 ms,
so 8 windows close (the ninth, [160, 180), is still open at the end)."""


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
    return {p: dict(records) for p, records in _records(settings, settings.topics.frontier).items()}


def decisions_per_fetcher(settings: KafkaSettings) -> dict[str, list[ScalingDecision]]:
    """Each fetcher's ScalingDecisions on fetcher-control, in order, each once (a runner
    that retried a bundle or restored a checkpoint sends some again); every record keyed
    by its fetcher's id."""
    out: dict[str, list[ScalingDecision]] = {}
    partitions = _records(settings, settings.topics.fetcher_control).values()
    for key, value in (record for records in partitions for record in records):
        assert value is not None
        decision = decode_record(ScalingDecision, value)
        assert key == decision.fetcher_id.encode()
        kept = out.setdefault(decision.fetcher_id, [])
        if decision not in kept:
            kept.append(decision)
    return out


def _records(
    settings: KafkaSettings, topic: str
) -> dict[int, list[tuple[bytes | None, bytes | None]]]:
    """Every (key, value) of `topic` to its current end, partition by partition, in order."""
    consumer = KafkaConsumer(bootstrap_servers=settings.bootstrap_servers, enable_auto_commit=False)
    try:
        out: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        for p in sorted(consumer.partitions_for_topic(topic) or ()):
            tp = TopicPartition(topic, p)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            end = consumer.end_offsets([tp])[tp]
            out[p] = []
            while consumer.position(tp) < end:
                for records in consumer.poll(timeout_ms=500).values():
                    out[p].extend((r.key, r.value) for r in records)
        return out
    finally:
        consumer.close()


def engine_and_beam_settings(engine: KafkaSettings) -> tuple[KafkaSettings, KafkaSettings]:
    """The live engine's settings and the Beam job's: the same fetch-events topic, each its
    own frontier topic of `FRONTIER_PARTITIONS` partitions and its own fetcher-control topic,
    all created here."""
    t = engine.topics
    beam_side = dataclasses.replace(
        engine,
        topics=dataclasses.replace(
            t, frontier=t.frontier + "-b", fetcher_control=t.fetcher_control + "-b"
        ),
    )
    for settings in (engine, beam_side):
        wide = dataclasses.replace(settings, partitions=FRONTIER_PARTITIONS)
        ensure_compacted_topic(wide, settings.topics.frontier)
        ensure_topics(settings)  # the rest, as `frontierflow run` makes them
    return engine, beam_side
