"""The Kafka client interface's two backends: kafka-python's connection settings mapped to
librdkafka's names (or refused by name), the choice of client, and, on the real broker, the
same partitions for the same frontier records and the same lag from either reader."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from polling import wait_for

from frontierflow.connectors.kafka import (
    KafkaFetchEventSource,
    KafkaSettings,
    KafkaSink,
    ensure_topics,
    host_partition,
)
from frontierflow.connectors.kafka_client import resolve_client
from frontierflow.connectors.librdkafka_config import (
    LIBRDKAFKA_NAMES,
    NO_LIBRDKAFKA_EQUIVALENT,
    librdkafka_config,
)
from frontierflow.pipelines.embedded.live import LiveOptions
from frontierflow.schemas.records import REPLY_ECHO, FrontierEntry, Removal

CLIENTS = pytest.mark.parametrize("client", ["kafka-python", "confluent"])


def _settings(**client: Any) -> KafkaSettings:
    return KafkaSettings("b1:9092,b2:9093", client=client)


def test_sasl_over_tls_maps_to_librdkafka_names() -> None:
    settings = _settings(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="crawler",
        sasl_plain_password="secret",
        ssl_cafile="/etc/ca.pem",
        ssl_certfile="/etc/client.pem",
        ssl_keyfile="/etc/client.key",
        ssl_password="keypass",
        ssl_check_hostname="false",
        request_timeout_ms=40000,
        client_id="frontier-7",
    )
    assert librdkafka_config(settings) == {
        "bootstrap.servers": "b1:9092,b2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "crawler",
        "sasl.password": "secret",
        "ssl.ca.location": "/etc/ca.pem",
        "ssl.certificate.location": "/etc/client.pem",
        "ssl.key.location": "/etc/client.key",
        "ssl.key.password": "keypass",
        "ssl.endpoint.identification.algorithm": "none",
        "socket.timeout.ms": 40000,
        "client.id": "frontier-7",
    }


@pytest.mark.parametrize(
    ("value", "algorithm"),
    [(True, "https"), ("true", "https"), ("1", "https"), (False, "none"), ("no", "none")],
)
def test_hostname_check_is_librdkafkas_identification_algorithm(
    value: object, algorithm: str
) -> None:
    config = librdkafka_config(_settings(ssl_check_hostname=value))
    assert config["ssl.endpoint.identification.algorithm"] == algorithm


def test_a_hostname_check_that_is_not_a_flag_is_refused() -> None:
    with pytest.raises(ValueError, match=r"ssl_check_hostname.*true or false"):
        librdkafka_config(_settings(ssl_check_hostname="maybe"))


@pytest.mark.parametrize("name", sorted(NO_LIBRDKAFKA_EQUIVALENT))
def test_settings_librdkafka_cannot_take_are_refused_by_name(name: str) -> None:
    with pytest.raises(ValueError, match=f"'{name}' has no librdkafka equivalent"):
        librdkafka_config(_settings(**{name: object()}))


def test_unknown_settings_are_refused_before_any_client() -> None:
    with pytest.raises(ValueError, match="unknown Kafka client settings"):
        _settings(**{"sasl.mechanism": "PLAIN"})


def test_every_mapped_name_is_one_librdkafka_accepts() -> None:
    """librdkafka rejects an unknown property when a client is built; plain values, so
    nothing is opened (no TLS context without an SSL protocol)."""
    values = {
        "security.protocol": "PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "ssl.cipher.suites": "ECDHE-RSA-AES256-GCM-SHA384",
    }
    config = {
        name: values.get(name, 1000 if name.endswith(".ms") else "x")
        for name in LIBRDKAFKA_NAMES.values()
        if not name.startswith("ssl.") or name in values
    }
    Producer({"bootstrap.servers": "127.0.0.1:1", **config}).flush(0)
    Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", **config}).close()


def test_client_choice() -> None:
    assert resolve_client("auto") == "confluent"  # installed with the project
    assert resolve_client("kafka-python") == "kafka-python"
    with pytest.raises(ValueError, match="unknown Kafka client 'rdkafka'"):
        resolve_client("rdkafka")
    with pytest.raises(ValueError, match="unknown Kafka client 'rdkafka'"):
        LiveOptions(kafka_client="rdkafka")
    with pytest.raises(ValueError, match="unknown Kafka client 'rdkafka'"):
        KafkaSettings("b1:9092", client_library="rdkafka")
    assert KafkaSettings("b1:9092").library == "confluent"
    assert KafkaSettings("b1:9092", client_library="kafka-python").library == "kafka-python"


def _entry(url: str, via: str | None = None, reply: bool = False) -> FrontierEntry:
    echo = {REPLY_ECHO: "1"} if reply else {}
    return FrontierEntry(url, url.split("/")[2], 1.0, "t", "c", 0, via, 0, echo)


@pytest.mark.kafka
@CLIENTS
def test_each_client_writes_the_same_keys_to_the_same_partitions(
    kafka_broker: Any, kafka_client: Any, client: str
) -> None:
    settings = dataclasses.replace(kafka_client.settings(kafka_broker.bootstrap), partitions=5)
    ensure_topics(settings, client)
    sink = KafkaSink(settings, client=client)
    urls = [f"http://h{i}.test/p" for i in range(12)]
    reply = _entry("http://b.test/x", via="http://a.test/", reply=True)
    sink.write([*(_entry(u) for u in urls), reply, Removal(urls[0])], [])
    sink.flush()
    sink.close()
    found = kafka_client.read_partitions(settings, settings.topics.frontier)
    expected = {(u.encode(), host_partition(u, 5)) for u in urls}
    expected.add((b"http://b.test/x\x00http://a.test/", host_partition("http://b.test/x", 5)))
    assert {(key, p) for key, _value, p in found} == expected
    assert [v for key, v, _ in found if key == urls[0].encode()][-1] is None  # tombstone


@pytest.mark.kafka
@CLIENTS
def test_lag_from_the_last_fetch_equals_the_brokers_once_fetched(
    kafka_broker: Any, kafka_client: Any, client: str
) -> None:
    settings = kafka_client.settings(kafka_broker.bootstrap)
    ensure_topics(settings)
    kafka_client.produce(settings, kafka_client.avro(kafka_client.events(7)))
    source = KafkaFetchEventSource(settings, None, client)
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
