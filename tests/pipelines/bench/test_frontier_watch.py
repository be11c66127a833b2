"""`bench kafka --beam-stream`'s wait on the form's frontier topic (`FrontierWatch.until`),
on the real broker, with the rest shortened: a rest at which the topic holds fewer unread
records than expected keys are missing is not read (it cannot match yet); the time
returned is the Kafka timestamp of the record that completed the match."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer

from frontierflow.pipelines.bench import frontier_match
from frontierflow.pipelines.bench.frontier_match import FrontierMatch, FrontierWatch

pytestmark = pytest.mark.kafka


def test_a_rest_that_cannot_match_is_not_read(
    kafka_broker: Any,
    kafka_client: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(frontier_match, "QUIET_S", 0.3)
    monkeypatch.setattr(frontier_match, "POLL_S", 0.05)
    settings = kafka_client.settings(kafka_broker.bootstrap)
    topic = settings.topics.frontier
    kafka_client.produce_to(settings, topic, [])  # the job's topics, empty
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")

    def send(key: bytes) -> int:
        record = producer.send(topic, key=key, value=b"entry").get(timeout=30)
        return int(record.timestamp)

    send(b"a")
    send(b"b")
    polls: list[int] = []
    sent: list[int] = []

    def check(match: FrontierMatch) -> None:
        polls.append(match.records)
        # a rest (0.3 s) has passed without a read: then the third key comes
        if not sent and len(polls) > 20:
            sent.append(send(b"c"))
        if len(polls) > 2_000:
            raise AssertionError("no match")

    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, enable_auto_commit=False)
    watch = FrontierWatch(consumer, topic, set(), check)
    at = watch.until({b"a", b"b", b"c"}, "test")
    assert at == sent[0] / 1000  # the record that completed the match
    assert watch.match.records == 3
    assert set(polls[:20]) == {0}  # nothing read while 2 records could not hold 3 keys
    err = capsys.readouterr().err
    assert "test: rested 0 s at 2 records, at least 1 expected keys missing (not read)" in err
