"""The Kafka client interface as a consumer-group member and as a reader to the end, on the
real broker, each case once per backend (kafka-python, confluent-kafka): two readers in one
group split a three-partition topic, the first one's partitions are revoked before the split
and it gets them all back when the other closes, each partition read again from its
beginning on every assignment; a reader that starts from the group's committed offsets
resumes where the last one committed, and a member left without a partition is told so;
partitions read to the end they have now."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
from polling import wait_for

from frontierflow.connectors.kafka import ensure_topics, open_admin, open_reader, open_writer
from frontierflow.connectors.kafka_client import (
    BrokerError,
    GroupStart,
    KafkaRecord,
    RecordReader,
    read_to_end,
)
from frontierflow.connectors.kafka_settings import KafkaSettings

pytestmark = pytest.mark.kafka

CLIENTS = pytest.mark.parametrize("client", ["kafka-python", "confluent"])
DEADLINE_S = 60.0


class Member:
    """A group member and what its `RebalanceListener` calls told it, checked as they come:
    the calls arrive on the polling thread, a revocation takes partitions the member owns,
    and no record comes from a partition the member does not own."""

    def __init__(self, reader: RecordReader) -> None:
        self.reader = reader
        self.owned: set[int] = set()
        self.assignments: list[list[int]] = []
        self.revocations: list[list[int]] = []
        self.records: list[KafkaRecord] = []
        self.polling_thread = threading.get_ident()

    def assigned(self, partitions: list[int]) -> None:
        assert threading.get_ident() == self.polling_thread
        assert partitions == sorted(partitions)
        self.owned = set(partitions)
        self.assignments.append(partitions)

    def revoked(self, partitions: list[int]) -> None:
        assert threading.get_ident() == self.polling_thread
        assert partitions and set(partitions) <= self.owned
        self.owned -= set(partitions)
        self.revocations.append(partitions)

    def poll(self) -> None:
        batch = self.reader.poll(500, 100)
        assert {r.partition for r in batch} <= self.owned, (batch, self.owned)
        self.records += batch


def _poll_until(members: list[Member], done: Any, what: str) -> None:
    """Poll every member in turn until `done()` (a rebalance needs each member to poll)."""

    def step() -> bool:
        for member in members:
            member.poll()
        return bool(done())

    wait_for(step, what, DEADLINE_S, interval_s=0)


def _member(settings: KafkaSettings, client: str, topic: str, start: GroupStart) -> Member:
    reader = open_reader(settings, client)  # type: ignore[arg-type]
    member = Member(reader)
    reader.subscribe(topic, member, start)
    return member


def _offsets(records: list[KafkaRecord], partitions: set[int]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {p: [] for p in sorted(partitions)}
    for r in records:
        if r.partition in partitions:
            out[r.partition].append(r.offset)
    return out


def _write(settings: KafkaSettings, client: str, topic: str, per_partition: dict[int, int]) -> None:
    writer = open_writer(settings, client)  # type: ignore[arg-type]
    try:
        writer.send_many(
            topic,
            [
                (f"k{p}-{i}".encode(), f"v{p}-{i}".encode(), p)
                for p, n in per_partition.items()
                for i in range(n)
            ],
        )
        writer.flush()
    finally:
        writer.close()


@CLIENTS
def test_two_members_split_the_partitions_and_one_gets_all_back_when_the_other_closes(
    kafka_broker: Any, kafka_client: Any, client: str
) -> None:
    settings = dataclasses.replace(kafka_client.settings(kafka_broker.bootstrap), partitions=3)
    ensure_topics(settings, client)  # type: ignore[arg-type]
    topic = settings.topics.frontier
    counts = {0: 4, 1: 3, 2: 5}
    _write(settings, client, topic, counts)
    everything = {p: list(range(n)) for p, n in counts.items()}

    first = _member(settings, client, topic, "beginning")
    second: Member | None = None
    try:
        _poll_until(
            [first], lambda: len(first.records) == 12, "the first member to read all 12 records"
        )
        assert first.owned == {0, 1, 2} and first.revocations == []
        assert _offsets(first.records, {0, 1, 2}) == everything
        ends = first.reader.end_offsets([0, 1, 2])
        assert ends == counts
        assert {p: first.reader.position(p) for p in ends} == counts

        second = _member(settings, client, topic, "beginning")
        members = [first, second]

        def split() -> bool:
            assert second is not None
            mine, theirs = first.owned, second.owned
            return bool(mine and theirs) and not mine & theirs and mine | theirs == {0, 1, 2}

        _poll_until(members, split, "the two members to split the three partitions")
        assert first.revocations and set(first.revocations[0]) == {0, 1, 2}  # eager: all
        theirs = set(second.owned)
        written = everything_records(counts)
        _poll_until(
            members,
            lambda: _offsets(second.records, theirs) == _offsets(written, theirs),
            "the second member to read its partitions from their beginning",
        )
        before_close = len(first.records)
        second.reader.close()
        second = None
        _poll_until(
            [first], lambda: first.owned == {0, 1, 2}, "the first member to get every partition"
        )
        _poll_until(
            [first],
            lambda: _offsets(first.records[before_close:], theirs) == _offsets(written, theirs),
            "the partitions handed back to be read from their beginning",
        )
        assert first.assignments[-1] == [0, 1, 2]
    finally:
        first.reader.close()
        if second is not None:
            second.reader.close()


def everything_records(counts: dict[int, int]) -> list[KafkaRecord]:
    """The records `_write` wrote, as a reader of every partition from its beginning reads
    them."""
    return [
        KafkaRecord(p, i, f"k{p}-{i}".encode(), f"v{p}-{i}".encode())
        for p, n in counts.items()
        for i in range(n)
    ]


@CLIENTS
def test_a_member_starts_from_the_offset_its_group_committed(
    kafka_broker: Any, kafka_client: Any, client: str
) -> None:
    settings = kafka_client.settings(kafka_broker.bootstrap)
    ensure_topics(settings, client)  # type: ignore[arg-type]
    topic = settings.topics.frontier
    _write(settings, client, topic, {0: 10})

    reader = _member(settings, client, topic, "committed")
    try:
        _poll_until([reader], lambda: len(reader.records) == 10, "the ten records")
        reader.reader.commit({0: 4})
    finally:
        reader.reader.close()

    resumed = _member(settings, client, topic, "committed")
    try:
        _poll_until([resumed], lambda: len(resumed.records) == 6, "the six records after 4")
        assert [r.offset for r in resumed.records] == list(range(4, 10))
        assert resumed.records[0].value == b"v0-4"
        assert resumed.assignments[-1] == [0] and resumed.reader.position(0) == 10
        # one partition, two members: the one left out is told it has none
        spare = _member(settings, client, topic, "committed")
        try:
            pair = [resumed, spare]
            _poll_until(pair, lambda: spare.assignments, "the second member's assignment")
            _poll_until(pair, lambda: resumed.owned | spare.owned == {0}, "partition 0 owned")
            left_out = spare if resumed.owned else resumed
            assert left_out.assignments[-1] == [] and not left_out.owned
        finally:
            spare.reader.close()
    finally:
        resumed.reader.close()

    rebuilt = _member(settings, client, topic, "beginning")  # the same group
    try:
        _poll_until([rebuilt], lambda: len(rebuilt.records) == 10, "all ten records again")
        assert [r.offset for r in rebuilt.records] == list(range(10))
    finally:
        rebuilt.reader.close()


@CLIENTS
def test_chosen_partitions_are_read_to_the_end_they_have(
    kafka_broker: Any, kafka_client: Any, client: str
) -> None:
    settings = dataclasses.replace(kafka_client.settings(kafka_broker.bootstrap), partitions=3)
    ensure_topics(settings, client)  # type: ignore[arg-type]
    topic = settings.topics.fetched
    counts = {0: 3, 1: 0, 2: 7}
    _write(settings, client, topic, counts)
    admin = open_admin(settings, client)  # type: ignore[arg-type]
    reader = open_reader(settings, client)  # type: ignore[arg-type]
    try:
        assert admin.partitions(topic) == 3 and admin.partitions("no-such-topic") == 0
        assert reader.topic_partitions(topic) == [0, 1, 2]
        assert reader.topic_partitions("no-such-topic") == []
        assert read_to_end(reader, topic, [1, 2, 9]) == [
            r for r in everything_records(counts) if r.partition == 2
        ]
        assert read_to_end(reader, topic) == everything_records(counts)
        with pytest.raises(BrokerError, match="no-such-topic"):
            read_to_end(reader, "no-such-topic")
    finally:
        reader.close()
        admin.close()
