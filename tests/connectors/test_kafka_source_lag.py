"""The fetch-events source's lag: asked of the broker (`lag`), or read off the last fetch
responses (`lag_estimate`, what a watched job reads every second) — equal once the source
has fetched, on a real broker."""

from __future__ import annotations

from typing import Any

import pytest
from polling import wait_for

from frontierflow.connectors.kafka import KafkaFetchEventSource, ensure_topics

pytestmark = pytest.mark.kafka


def test_lag_from_the_last_fetch_equals_the_brokers_once_fetched(
    kafka_broker: Any, kafka_client: Any
) -> None:
    settings = kafka_client.settings(kafka_broker.bootstrap)
    ensure_topics(settings)
    kafka_client.produce(settings, kafka_client.avro(kafka_client.events(7)))
    source = KafkaFetchEventSource(settings, None)
    try:
        assert source.lag() == 7
        assert source.lag_estimate() == 7  # no fetch yet: it asks the broker
        got: list[Any] = []

        def read_three() -> bool:
            items, _ = source.poll(3 - len(got), 200)
            got.extend(items)
            return len(got) >= 3

        wait_for(read_three, "three records read")
        assert len(got) == 3
        assert source.lag_estimate() == source.lag() == 4
    finally:
        source.close()
