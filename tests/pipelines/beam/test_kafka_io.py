"""The Java Kafka source's Python side (`beam.kafka_io`): the topic it needs, and what it
makes of a record. Its run on Flink is `test_flink_kafka_stream.py`."""

from __future__ import annotations

from typing import Any

import apache_beam as beam
import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from frontierflow.connectors.kafka import ensure_topics
from frontierflow.pipelines.beam.io import DEAD
from frontierflow.pipelines.beam.kafka import with_finished_bundles
from frontierflow.pipelines.beam.kafka_io import check_log_append_time, record_item
from frontierflow.pipelines.beam.kafka_records import FUTURE_EVENT
from frontierflow.schemas.codecs import AvroCodec
from frontierflow.schemas.records import DeadLetter, FetchEvent

LOG_APPEND_TIME_TYPE = 1  # kafka-python's timestamp_type of a broker-stamped record


@pytest.mark.kafka
def test_the_job_creates_fetch_events_stamped_on_arrival(
    kafka_broker: Any, kafka_client: Any
) -> None:
    settings = kafka_client.settings(kafka_broker.bootstrap)
    record = kafka_client.events(1, seed=5)[0]
    kafka_client.produce(settings, kafka_client.avro([record]))  # creates the topics
    check_log_append_time(settings)
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, enable_auto_commit=False)
    tp = TopicPartition(settings.topics.fetch_events, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    polled = consumer.poll(timeout_ms=10_000).get(tp, [])
    consumer.close()
    assert [r.timestamp_type for r in polled] == [LOG_APPEND_TIME_TYPE]


@pytest.mark.kafka
def test_a_topic_keeping_producer_timestamps_is_refused(
    kafka_broker: Any, kafka_client: Any
) -> None:
    settings = kafka_client.settings(kafka_broker.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    admin.create_topics([NewTopic(settings.topics.fetch_events, 1, 1)])  # CreateTime
    admin.close()
    ensure_topics(settings)  # leaves an existing topic as it is
    with pytest.raises(ValueError, match=r"message\.timestamp\.type=LogAppendTime on it"):
        check_log_append_time(settings)


def _record() -> dict[str, Any]:
    from conftest import KafkaClient

    return KafkaClient.events(1, seed=3)[0]


def test_a_record_becomes_its_event_at_its_position() -> None:
    record = _record()
    value = AvroCodec.for_name("FetchEvent").encode(record)
    position, event = record_item("t", 2, 5, value, record["fetched_at"] + 10)
    assert position == 5 * 4096 + 2  # by offset, then partition
    assert event == FetchEvent.from_avro(record)


def test_bad_records_become_dead_letters_with_their_bytes() -> None:
    out = record_item("t", 0, 9, b"garbage", 0)
    assert isinstance(out, beam.pvalue.TaggedOutput) and out.tag == DEAD
    letter = out.value
    assert isinstance(letter, DeadLetter)
    assert (letter.source, letter.partition, letter.offset, letter.raw) == ("t", 0, 9, b"garbage")
    assert letter.error_class == "CodecError"

    record = _record()
    future = {**record, "fetched_at": record["fetched_at"] + 3_600_001}
    value = AvroCodec.for_name("FetchEvent").encode(future)
    out = record_item("t", 0, 10, value, record["fetched_at"])  # 1 h 1 ms after Kafka got it
    assert out.value.error_class == FUTURE_EVENT
    assert out.value.raw == value


def test_the_flink_form_always_finishes_bundles_before_a_checkpoint() -> None:
    """The option is added once, whatever else the operator gave."""
    given = ["--runner=FlinkRunner", "--streaming"]
    assert with_finished_bundles(given) == [*given, "--finish_bundle_before_checkpointing"]
    assert given == ["--runner=FlinkRunner", "--streaming"]  # not changed in place
    again = with_finished_bundles(with_finished_bundles(given))
    assert again.count("--finish_bundle_before_checkpointing") == 1
