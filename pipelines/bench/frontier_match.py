"""Whether, and when, a frontier topic came to hold the keys expected: the live keys of its
compacted copy (`live_keys`), kept record by record against an expected set
(`FrontierMatch`), and a wait that reads the topic only once it rests (`FrontierWatch`), so a
bench's consumer does not share the machine with the job it times."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from kafka import KafkaConsumer, TopicPartition

from frontierflow.pipelines.bench.kafka import read_topic

QUIET_S = 10.0
"""How long the Beam form's frontier topic must stay the same length before the bench reads
what came (it keeps reading, and waiting, until the topic holds the expected keys). A form
at work rests too: with 10M URLs in state often for 2 s, now and then for 10 s
(`docs/results/beam.md`). The bench then reads beside it, unless the topic holds fewer
unread records than expected keys are missing (it cannot match yet)."""
POLL_S = 0.25
"""How often the bench asks the broker for the frontier topic's length while it waits."""


class FrontierMatch:
    """The live keys of a frontier topic as its records are read, against the keys expected:
    when, by the records' own Kafka timestamps, the topic's compacted copy came to hold
    exactly the expected keys with a value (the time of the record after which it did and
    still does; None while it does not). Kept by counts, so each record costs O(1)."""

    def __init__(self, expected: set[bytes]) -> None:
        self.live: set[bytes] = set()
        self.records = 0
        self.first_ms: int | None = None
        """The first record's timestamp."""
        self.last_ms = 0
        self.expect(expected)

    def expect(self, expected: set[bytes]) -> None:
        """Match `expected` from now on (the keys read so far stay)."""
        self.expected = expected
        self.missing = len(expected - self.live)
        self.extra = len(self.live - expected)
        self.matched_ms: int | None = None
        if not self.missing and not self.extra and self.records:
            self.matched_ms = self.last_ms

    def add(self, timestamp_ms: int, key: bytes | None, value: bytes | None) -> None:
        self.records += 1
        self.last_ms = timestamp_ms
        if self.first_ms is None:
            self.first_ms = timestamp_ms
        if key is not None and (value is not None) != (key in self.live):
            step = 1 if value is not None else -1
            if value is not None:
                self.live.add(key)
            else:
                self.live.discard(key)
            if key in self.expected:
                self.missing -= step
            else:
                self.extra += step
        if self.missing or self.extra:
            self.matched_ms = None
        elif self.matched_ms is None:
            self.matched_ms = timestamp_ms


def live_keys(bootstrap: str, topic: str) -> set[bytes]:
    """The keys a compacted copy of `topic` would hold with a value (not a tombstone)."""
    match = FrontierMatch(set())
    for timestamp, key, value in read_topic(bootstrap, topic):
        match.add(timestamp, key, value)
    return match.live


class FrontierWatch:
    """A consumer of a frontier topic, from its start, with its `FrontierMatch`."""

    def __init__(
        self,
        consumer: KafkaConsumer,
        topic: str,
        expected: set[bytes],
        check: Callable[[FrontierMatch], None],
    ) -> None:
        self.consumer = consumer
        self.parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(self.parts)
        consumer.seek_to_beginning(*self.parts)
        self.match = FrontierMatch(expected)
        self.check = check
        """Called at every poll of the topic's length: raises to give up (a timeout, the
        job's end)."""

    def until(self, expected: set[bytes], label: str) -> float:
        """The epoch seconds at which the topic came to hold `expected`, read once it has
        stopped growing for `QUIET_S`; a rest that is not the end is said on stderr."""
        match, consumer, parts = self.match, self.consumer, self.parts
        match.expect(expected)
        length, grew = -1, time.monotonic()
        while True:
            self.check(match)
            ends = consumer.end_offsets(parts)
            now = time.monotonic()
            if sum(ends.values()) != length:
                length, grew = sum(ends.values()), now
            elif now - grew >= QUIET_S:
                unread = sum(ends[tp] - consumer.position(tp) for tp in parts)
                if unread < match.missing:  # each key missing needs a record yet to come
                    said = f"at least {match.missing - unread:,} expected keys missing (not read)"
                else:
                    while any(consumer.position(tp) < ends[tp] for tp in parts):
                        for batch in consumer.poll(timeout_ms=500, max_records=10_000).values():
                            for record in batch:
                                match.add(record.timestamp, record.key, record.value)
                    if match.matched_ms is not None:
                        return match.matched_ms / 1000
                    said = f"{match.missing:,} expected keys missing"  # read beside the job
                print(  # the job rested while at work
                    f"{label}: rested {QUIET_S:.0f} s at {length:,} records, {said}",
                    file=sys.stderr,
                    flush=True,
                )
                grew = now  # not yet: wait for the topic to grow and rest again
            time.sleep(POLL_S)
