"""The one Kafka client interface the project talks through, whichever library is below it.

A `RecordReader` reads one topic, either every partition (or chosen ones) by manual assignment
from given offsets, or as one member of a consumer group, told of the partitions it gains and
loses by a `RebalanceListener`; it returns batches of raw records, says where it is in each
partition and where each ends, and commits the group's offsets. A `RecordWriter` sends records
to chosen partitions and confirms, on `flush`, that the broker acknowledged every one; a
`TopicAdmin` lists and creates topics. `read_to_end` reads partitions from their beginning to
the end they have now. Two backends implement them: kafka-python (`connectors.kafka_python`)
and librdkafka through confluent-kafka (`connectors.kafka_confluent`). Both raise
`BrokerError` for a broker that cannot be reached or refuses a request, so a caller handles
one error type.
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, Protocol

KafkaClientName = Literal["kafka-python", "confluent"]
KAFKA_CLIENTS = ("auto", "kafka-python", "confluent")
"""The choices of `--kafka-client`; `auto` is `confluent` when it is installed."""


class BrokerError(RuntimeError):
    """The broker could not be reached, or refused a request; what was not committed is
    redone after reconnecting."""


class SinkError(BrokerError):
    """The broker did not acknowledge every output of a step; the step is not committed."""


@contextlib.contextmanager
def broker_errors(library_error: type[Exception]) -> Iterator[None]:
    """A backend library's `library_error` raised inside as the interface's `BrokerError`."""
    try:
        yield
    except library_error as exc:
        raise BrokerError(str(exc)) from exc


def resolve_client(name: str) -> KafkaClientName:
    """The client library `name` stands for: `auto` is confluent-kafka (librdkafka, an
    order of magnitude faster at producing) when it is installed, else kafka-python."""
    if name == "auto":
        return "confluent" if importlib.util.find_spec("confluent_kafka") else "kafka-python"
    if name == "confluent":
        if importlib.util.find_spec("confluent_kafka") is None:
            raise ValueError("--kafka-client confluent: install confluent-kafka")
        return "confluent"
    if name == "kafka-python":
        return "kafka-python"
    raise ValueError(f"unknown Kafka client {name!r}; choose one of {', '.join(KAFKA_CLIENTS)}")


class KafkaRecord(NamedTuple):
    """One record as read: where it is, and its raw key and value (None: absent)."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


GroupStart = Literal["beginning", "committed"]
"""Where a group member reads a partition it is assigned: from the partition's beginning (a
reader that rebuilds what it owns from a compacted topic), or from the group's committed
offset, the beginning when the group has none."""

ASSIGNORS = ("range", "roundrobin")
"""The group's partition assignors, in both libraries' names: eager ones, so a rebalance
revokes every partition of every member before it assigns them again, and members on either
library can share one group."""


class RebalanceListener(Protocol):
    """What a group member is told when its partitions change. Both methods are called on
    the thread that polls, inside `RecordReader.poll`, once the library has settled the
    change; a partition's records come after its `assigned` call, never after the
    `revoked` call that took it away. Closing the reader calls neither."""

    def assigned(self, partitions: list[int]) -> None:
        """The partitions this member reads from now on, in order (empty: it has none, as
        when the group has more members than the topic partitions)."""

    def revoked(self, partitions: list[int]) -> None:
        """Partitions this member no longer reads (never empty)."""


class RecordReader(ABC):
    """Reads one topic: chosen partitions by hand (`assign`), or the partitions the
    reader's consumer group gives it (`subscribe`)."""

    @abstractmethod
    def assign(
        self,
        topic: str,
        next_offsets: Mapping[int, int],
        partitions: Collection[int] | None = None,
    ) -> list[int]:
        """Read the partitions of `topic` (only those of `partitions` it has; None: every
        one), each from its offset in `next_offsets`, the others from their beginning;
        returns the partitions read, in order. BrokerError if the topic has none."""

    @abstractmethod
    def subscribe(
        self, topic: str, listener: RebalanceListener, start: GroupStart = "committed"
    ) -> None:
        """Read `topic` as one member of the reader's consumer group (`KafkaSettings.group_id`):
        the group splits the partitions between its members (`ASSIGNORS`), and `listener`
        hears of every change. A partition assigned is read from `start`."""

    @abstractmethod
    def poll(self, max_records: int, timeout_ms: int) -> list[KafkaRecord]:
        """Up to `max_records` records, each partition's in offset order; waits at most
        `timeout_ms` for the first. A group member's listener is called in here."""

    @abstractmethod
    def topic_partitions(self, topic: str) -> list[int]:
        """The partitions of `topic`, in order; empty when there is no such topic."""

    @abstractmethod
    def position(self, partition: int) -> int:
        """The offset of the next record this reader reads from `partition` of its topic
        (one it reads now)."""

    @abstractmethod
    def end_offsets(self, partitions: Collection[int]) -> dict[int, int]:
        """partition → the offset the next record written to it will have, for
        `partitions` of the reader's topic, asking the broker."""

    @abstractmethod
    def lag(self) -> int:
        """Records not yet read, asking the broker for the end offsets."""

    @abstractmethod
    def lag_estimate(self) -> int:
        """Records not yet read as of the last fetch responses, without a request to the
        broker where the library keeps them (`lag` otherwise)."""

    @abstractmethod
    def commit(self, next_offsets: Mapping[int, int]) -> None:
        """Store partition → next offset to read as the group's committed offsets, waiting
        for the broker; BrokerError when it refuses (a member commits only partitions it
        owns)."""

    @abstractmethod
    def commit_for_monitoring(self, next_offsets: Mapping[int, int]) -> None:
        """Tell the consumer group where the reader is; informational (restarts use the
        caller's own checkpoint), so a failure is only logged."""

    @abstractmethod
    def close(self) -> None: ...


READ_TO_END_BATCH = 5000
READ_TO_END_POLL_MS = 200


def read_to_end(
    reader: RecordReader,
    topic: str,
    partitions: Collection[int] | None = None,
    stall_s: float = 60.0,
    clock: Callable[[], float] = time.monotonic,
) -> list[KafkaRecord]:
    """Every record of `topic`'s `partitions` (None: all of them) from their beginning to
    the end they have when asked (and any written meanwhile that came with them), through
    `reader` (assigned by hand; close it after).
    BrokerError if the topic has no partitions, or when no record arrives for `stall_s`
    while some are still to be read."""
    parts = reader.assign(topic, {}, partitions)
    ends = reader.end_offsets(parts)
    waiting = {p: end for p, end in ends.items() if reader.position(p) < end}
    out: list[KafkaRecord] = []
    last_record = clock()
    while waiting:
        batch = reader.poll(READ_TO_END_BATCH, READ_TO_END_POLL_MS)
        out += batch
        if batch:
            last_record = clock()
        elif clock() - last_record > stall_s:
            raise BrokerError(
                f"{topic!r}: no record for {stall_s:g} s with {sorted(waiting)} not read to "
                "their end"
            )
        for p in [p for p, end in waiting.items() if reader.position(p) >= end]:
            del waiting[p]
    return out


class RecordWriter(ABC):
    """Sends records with acknowledgement from all replicas, lz4-compressed."""

    @abstractmethod
    def partitions(self, topic: str) -> int:
        """How many partitions `topic` has (asked once, then remembered)."""

    @abstractmethod
    def send(
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None
    ) -> None:
        """Queue one record for `partition` (None: the key's murmur2 hash, as Kafka's Java
        client partitions, or any partition for no key)."""

    def send_many(
        self, topic: str, records: Sequence[tuple[bytes | None, bytes | None, int]]
    ) -> None:
        """Queue (key, value, partition) records."""
        send = self.send
        for key, value, partition in records:
            send(topic, key, value, partition)

    @abstractmethod
    def flush(self) -> None:
        """Return once the broker acknowledged every record sent since the last flush;
        SinkError if one was not written or the wait timed out."""

    @abstractmethod
    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic to create when missing."""

    name: str
    partitions: int
    replication_factor: int
    config: Mapping[str, str] = field(default_factory=dict)


class TopicAdmin(ABC):
    """Lists and creates topics."""

    @abstractmethod
    def topics(self) -> set[str]:
        """The names of the cluster's topics."""

    @abstractmethod
    def partitions(self, topic: str) -> int:
        """How many partitions `topic` has; 0 when there is no such topic."""

    @abstractmethod
    def create(self, specs: Sequence[TopicSpec]) -> None:
        """Create the topics; one that another client created meanwhile is not an error."""

    @abstractmethod
    def close(self) -> None: ...
