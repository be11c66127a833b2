"""The one Kafka client interface the live job talks through, whichever library is below it.

A `RecordReader` reads every partition of one topic by manual assignment from given offsets
and returns batches of raw records; a `RecordWriter` sends records to chosen partitions and
confirms, on `flush`, that the broker acknowledged every one; a `TopicAdmin` lists and creates
topics. Two backends implement them: kafka-python (`connectors.kafka_python`) and librdkafka through
confluent-kafka (`connectors.kafka_confluent`). Both raise `BrokerError` for a broker that
cannot be reached or refuses a request, so a caller handles one error type.
"""

from __future__ import annotations

import contextlib
import importlib.util
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

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


class RecordReader(ABC):
    """Reads every partition of one topic, assigned by hand (no group rebalancing)."""

    @abstractmethod
    def assign(self, topic: str, next_offsets: Mapping[int, int]) -> list[int]:
        """Read every partition of `topic`, each from its offset in `next_offsets`, the
        others from their beginning; returns the partitions in order. BrokerError if the
        topic has none."""

    @abstractmethod
    def poll(self, max_records: int, timeout_ms: int) -> list[KafkaRecord]:
        """Up to `max_records` records, each partition's in offset order; waits at most
        `timeout_ms` for the first."""

    @abstractmethod
    def lag(self) -> int:
        """Records not yet read, asking the broker for the end offsets."""

    @abstractmethod
    def lag_estimate(self) -> int:
        """Records not yet read as of the last fetch responses, without a request to the
        broker where the library keeps them (`lag` otherwise)."""

    @abstractmethod
    def commit_for_monitoring(self, next_offsets: Mapping[int, int]) -> None:
        """Tell the consumer group where the reader is; informational (restarts use the
        caller's own checkpoint), so a failure is only logged."""

    @abstractmethod
    def close(self) -> None: ...


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
    def create(self, specs: Sequence[TopicSpec]) -> None:
        """Create the topics; one that another client created meanwhile is not an error."""

    @abstractmethod
    def close(self) -> None: ...
