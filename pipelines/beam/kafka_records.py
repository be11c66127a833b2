"""What the Beam Kafka sources share: a record's place in the input order, the check of its
`fetched_at` against the record's Kafka timestamp, and dead letters as Kafka records."""

from __future__ import annotations

from frontierflow.connectors.base import Failed
from frontierflow.connectors.kafka import decode_fetch_event
from frontierflow.pipelines.core.validate import checked
from frontierflow.schemas.codecs import encode_record
from frontierflow.schemas.records import DeadLetter, FetchEvent

FUTURE_EVENT = "FutureEvent"
"""Dead-letter error class of an event fetched (it says) after Kafka received it."""
MAX_CLOCK_SKEW_MS = 3_600_000
"""How far `fetched_at` may be ahead of the record's Kafka timestamp (fetcher clocks
drift): a later one would move the watermark past every honest event and make them late."""


def checked_record(value: bytes | None, record_ms: int) -> FetchEvent | Failed:
    """A fetch-events record's value as a checked event, or why it cannot be one:
    undecodable, invalid, or fetched (it says) after Kafka received it."""
    item = checked(decode_fetch_event(value or None))
    return unless_from_the_future(item, record_ms) if isinstance(item, FetchEvent) else item


def unless_from_the_future(event: FetchEvent, record_ms: int) -> FetchEvent | Failed:
    if event.fetched_at <= record_ms + MAX_CLOCK_SKEW_MS:
        return event
    message = (
        f"fetched_at {event.fetched_at} is {event.fetched_at - record_ms} ms after the "
        f"record's Kafka timestamp {record_ms} (more than {MAX_CLOCK_SKEW_MS} ms of clock skew)"
    )
    return Failed(FUTURE_EVENT, message, b"")


def position_of(partition: int, offset: int) -> int:
    """A record's position in the pipelines' input order: by offset, then partition (with
    one partition, exactly the topic's order)."""
    return offset * _PARTITION_SLOTS + partition


_PARTITION_SLOTS = 1 << 12


KafkaRecord = tuple[str, bytes | None, bytes | None]
"""(topic, key, value) as `WriteToKafka` sends it."""


def dead_record(letter: DeadLetter, topic: str) -> KafkaRecord:
    return topic, None, encode_record(letter)
