"""Frontier records on Kafka: partitioned by host, keyed by URL (URL and parent for a reply
request), and the fetched topic the fetchers create beside the frontier, through either
client library."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from polling import wait_for

from frontierflow.connectors.kafka import (
    KafkaSettings,
    KafkaSink,
    ensure_fetched_topic,
    ensure_topics,
    frontier_records,
    host_partition,
    open_admin,
)
from frontierflow.connectors.kafka_client import BrokerError
from frontierflow.schemas.codecs import encode_record
from frontierflow.schemas.records import (
    REPLY_ECHO,
    FrontierEntry,
    Removal,
    frontier_record_key,
    split_frontier_key,
)


def _entry(url: str, via: str | None = None, reply: bool = False) -> FrontierEntry:
    echo = {REPLY_ECHO: "1"} if reply else {}
    return FrontierEntry(url, url.split("/")[2], 1.0, "t", "c", 0, via, 0, echo)


def test_host_partition_is_crc32_of_the_host() -> None:
    # CRC-32's standard check value: crc32("123456789") = 0xCBF43926 = 3421780262 = 5 mod 7
    assert host_partition("http://123456789/a.html", 7) == 5
    assert host_partition("https://123456789:8443/b?q=1", 7) == 5  # port and path do not count
    assert host_partition("http://A.Test/x", 4) == host_partition("http://a.test/y", 4)


def test_reply_requests_have_keys_of_their_own() -> None:
    plain = _entry("http://a.test/x")
    reply = _entry("http://a.test/x", via="http://a.test/", reply=True)
    assert frontier_record_key(plain) == "http://a.test/x"
    assert frontier_record_key(Removal("http://a.test/x")) == "http://a.test/x"
    assert frontier_record_key(reply) == "http://a.test/x\x00http://a.test/"
    assert split_frontier_key(frontier_record_key(reply)) == ("http://a.test/x", "http://a.test/")
    assert split_frontier_key("http://a.test/x") == "http://a.test/x"


@pytest.mark.parametrize("partitions", [7, 1])
def test_a_block_of_records_is_each_record_encoded_alone(partitions: int) -> None:
    """`frontier_records` encodes a step's entries as one block: the same values as
    fastavro's single-object encoding of each entry, the same partitions as
    `host_partition`, hosts with ports, user info and capitals included, an authority
    part seen again (its partition remembered) and one that is not a host's."""
    changes = [
        _entry("http://a.test/1"),
        Removal("http://a.test/2"),
        _entry("https://User@B.Test:8443/x?q=1", via="http://a.test/1"),
        _entry("http://b.test/y", via="http://a.test/", reply=True),
        FrontierEntry(
            "http://[::1]:8080/z", "::1", -2.5, "ieca", "c2", 3, None, 7, {"ieca.d": "1.5"}, 99
        ),
        Removal("https://C.test:443/"),
        _entry("http://a.test/3"),
        Removal("https://User@B.Test:8443/other"),
        _entry("http://B.TEST/z"),
        _entry("http://b.test?q=1/z", via="http://a.test/1"),
        _entry("http://b.test?q=2"),
    ]
    expected = [
        (
            frontier_record_key(c).encode(),
            None if isinstance(c, Removal) else encode_record(c),
            host_partition(c.url, partitions),
        )
        for c in changes
    ]
    assert frontier_records(changes, partitions) == expected


def _partitions_when_known(settings: KafkaSettings, topic: str, deadline_s: float = 30.0) -> int:
    """The topic's partition count once the broker's metadata shows it (creation is
    asynchronous), polled with a deadline."""
    admin = open_admin(settings)
    try:
        return wait_for(
            lambda: admin.partitions(topic), f"{topic}'s partitions", deadline_s, interval_s=0.1
        )
    finally:
        admin.close()


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_sink_writes_each_host_to_its_partition_and_fetched_topic_follows(
    kafka_broker: Any, kafka_client: Any, client: str
) -> None:
    settings = dataclasses.replace(
        kafka_client.settings(kafka_broker.bootstrap), partitions=3, client_library=client
    )
    ensure_topics(settings)
    sink = KafkaSink(settings)
    reply = _entry("http://b.test/x", via="http://a.test/", reply=True)
    sink.write([_entry("http://a.test/1"), reply, Removal("http://b.test/x")], [])
    sink.flush()
    sink.close()
    written = kafka_client.read_partitions(settings, settings.topics.frontier)
    found = {key: p for key, _value, p in written}
    assert found == {
        b"http://a.test/1": host_partition("http://a.test/1", 3),
        b"http://b.test/x\x00http://a.test/": host_partition("http://b.test/x", 3),
        b"http://b.test/x": host_partition("http://b.test/x", 3),
    }
    # a fetcher against a job without the fetched topic creates it like the frontier
    other = dataclasses.replace(
        settings,
        topics=dataclasses.replace(settings.topics, fetched="x-" + settings.topics.fetched),
    )
    ensure_fetched_topic(other)
    assert _partitions_when_known(other, other.topics.fetched) == 3
    missing = dataclasses.replace(
        settings, topics=dataclasses.replace(settings.topics, frontier="nope", fetched="nope2")
    )
    with pytest.raises(BrokerError, match="start the job first"):
        ensure_fetched_topic(missing)
