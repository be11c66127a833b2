"""The real broker from infra/kafka: topics, produce/consume, and a restart mid-run."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

pytestmark = pytest.mark.kafka

N = 100
DEADLINE_S = 60.0


def topic_config(admin: KafkaAdminClient, topic: str, name: str) -> str | None:
    """One config value of a topic, from describe_configs (kafka-python 2.x or 3.x)."""
    result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    if isinstance(result, dict):  # kafka-python 3.x: plain dicts
        return result["topic"][topic][name]["value"]
    for response in result:  # kafka-python 2.x: protocol responses
        for resource in response.resources:
            for entry in resource[4]:
                if entry[0] == name:
                    return entry[1]
    return None


def read_all(bootstrap: str, topic: str, expected: int) -> dict[bytes, bytes]:
    """Read the topic from the beginning until `expected` records arrived (or fail)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        records: dict[bytes, bytes] = {}
        deadline = time.monotonic() + DEADLINE_S
        while len(records) < expected:
            assert time.monotonic() < deadline, (
                f"read {len(records)} of {expected} records within {DEADLINE_S}s"
            )
            for batch in consumer.poll(timeout_ms=1000).values():
                for record in batch:
                    records[record.key] = record.value
        return records
    finally:
        consumer.close()


@pytest.mark.slow
def test_compacted_topic_survives_a_broker_restart(kafka_broker) -> None:
    bootstrap = kafka_broker.bootstrap
    topic = f"frontier-test-{uuid.uuid4().hex[:8]}"

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"cleanup.policy": "compact"})])
        assert topic in admin.list_topics()
        assert topic_config(admin, topic, "cleanup.policy") == "compact"
    finally:
        admin.close()

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10)
    try:
        # A compacted topic keeps the last value per key: keys are distinct URLs here.
        sent = {f"https://example.org/{i}".encode(): f"score={i}".encode() for i in range(N)}
        futures = [producer.send(topic, key=k, value=v) for k, v in sent.items()]
        producer.flush(timeout=DEADLINE_S)
        offsets = sorted(f.get(timeout=DEADLINE_S).offset for f in futures)
        assert offsets == list(range(N))
        assert read_all(bootstrap, topic, N) == sent

        # Restart the broker mid-run: same data dir, so same port and same messages.
        kafka_broker.stop()
        assert kafka_broker.start() == bootstrap

        # The producer made before the restart reconnects by itself.
        late_key, late_value = b"https://example.org/after-restart", b"score=late"
        producer.send(topic, key=late_key, value=late_value).get(timeout=DEADLINE_S)
        sent[late_key] = late_value
    finally:
        producer.close()

    assert read_all(bootstrap, topic, N + 1) == sent
