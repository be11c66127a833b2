"""The URL Frontier service in front of a live job on Kafka (`frontierflow run`).

Instead of an embedded engine, a `KafkaFrontier` publishes each reported page's FetchEvent
on fetch-events (acknowledged by the broker before the report's records commit and the
item is acknowledged) and follows the compacted frontier topic the job writes: every entry
sets its URL's priority, echo, via and cycle, committed with the topic offsets read so far
in one write batch, so a restart goes on from there. The job has no seed input, so seeds
are applied here with the strategy's own pure `apply` (no state kept): the entry it gives
carries the echo the job reads back in the seed's FetchEvent (IECA's distance, OPIC's cash,
BFS's depth), as the embedded engine's would. A report re-sent after a crash publishes its
FetchEvent again, which the job counts once (the repeat rule). Kafka is read and written
through the client interface (`connectors.kafka_client`), with the library the settings name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from frontierflow.connectors.kafka import (
    KafkaSettings,
    decode_offsets,
    encode_offsets,
    ensure_topics,
    open_reader,
    open_writer,
)
from frontierflow.connectors.kafka_client import BrokerError, KafkaRecord
from frontierflow.pipelines.core.step import seed_message
from frontierflow.pipelines.core.strategy import Strategy, as_changes
from frontierflow.pipelines.urlfrontier.frontier import Frontier, FrontierSettings
from frontierflow.pipelines.urlfrontier.records import Op
from frontierflow.schemas.codecs import AvroCodec, CodecError
from frontierflow.schemas.records import FetchEvent, FrontierChange, FrontierEntry
from frontierflow.state.storage.store import META_FAMILY, StateStore

log = logging.getLogger(__name__)

KAFKA_STRATEGIES = ("ieca", "bfs", "opic", "backlink", "random")
"""Strategies whose seeds this service can apply without the job's state (and whose job
needs no topic)."""
FRONTIER_OFFSETS = b"uf.frontier.offsets"
"""Meta key: the next offset to read per partition of the frontier topic."""


class PublishError(RuntimeError):
    """The broker did not acknowledge a FetchEvent: the report is not committed."""


class KafkaFrontier(Frontier):
    """A `Frontier` whose strategy runs in a live job on Kafka; see the module docstring."""

    def __init__(
        self,
        strategy: Strategy[Any],
        store: StateStore,
        kafka: KafkaSettings,
        settings: FrontierSettings | None = None,
        clock: Callable[[], float] = time.time,
        flush_timeout_s: float = 30.0,
    ) -> None:
        self.kafka = kafka
        self.flush_timeout_s = flush_timeout_s
        self._events = AvroCodec.for_name("FetchEvent")
        self._entries = AvroCodec.for_name("FrontierEntry")
        self._stop = threading.Event()
        self.followed = 0
        """Frontier entries applied from the topic (tombstones and bad records aside)."""
        self.bad_entries = 0
        super().__init__(strategy, store, settings, clock)
        self._follower = threading.Thread(
            target=self._follow, name="urlfrontier-follow", daemon=True
        )
        self._follower.start()

    def _start(self, strategy: Strategy[Any]) -> None:
        ensure_topics(self.kafka)
        self.writer = open_writer(self.kafka, flush_timeout_s=self.flush_timeout_s)

    def close(self) -> None:
        """Stop following the frontier topic and close the writer."""
        self._stop.set()
        self._follower.join(timeout=30)
        self.writer.close()

    def _report(self, event: FetchEvent, ops: list[Op]) -> None:
        value = self._events.encode(event.to_avro())
        try:
            self.writer.send(self.kafka.topics.fetch_events, event.host.encode(), value)
            self.writer.flush()
        except BrokerError as exc:
            raise PublishError(f"FetchEvent not acknowledged: {exc}") from exc
        self.records.write(ops)

    def _seed(self, crawl_id: str, urls: Sequence[str], ops: list[Op]) -> None:
        now_ms = int(self.clock() * 1000)
        strategy = self.strategy
        changes: list[FrontierChange] = []
        for url in urls:  # a fresh state: the priority the job gives a new seed
            key, message, clock = seed_message(strategy, url, crawl_id, 0, 0, now_ms)
            _, out = strategy.apply(key, None, message, clock)
            changes += as_changes(out)
        self.records.write(ops, changes)

    def _follow(self) -> None:
        """Apply the frontier topic's entries until `close`; reconnect on broker errors."""
        while not self._stop.is_set():
            try:
                self._follow_connected()
            except BrokerError as exc:
                log.warning("frontier topic unavailable (%s); retrying", exc)
                self._stop.wait(1.0)

    def _follow_connected(self) -> None:
        topic = self.kafka.topics.frontier
        reader = open_reader(self.kafka)
        try:
            while not reader.topic_partitions(topic):
                if self._stop.wait(0.5):
                    return
            offsets = decode_offsets(self.store.get(META_FAMILY, FRONTIER_OFFSETS))
            reader.assign(topic, offsets)
            while not self._stop.is_set():
                records = reader.poll(1000, 200)
                if records:
                    self._apply_batch(records, offsets)
        finally:
            reader.close()

    def _apply_batch(self, records: list[KafkaRecord], offsets: dict[int, int]) -> None:
        entries: list[FrontierChange] = []
        for record in records:
            offsets[record.partition] = record.offset + 1
            if record.value is None:
                continue  # a tombstone: the job saw the page fetched; its report did too
            try:
                entries.append(FrontierEntry.from_avro(self._entries.decode(record.value)))
            except (CodecError, KeyError, TypeError, ValueError) as exc:
                self.bad_entries += 1
                log.warning(
                    "frontier record at %d/%d unusable: %s", record.partition, record.offset, exc
                )
        with self.lock:
            self.records.write([], entries, (FRONTIER_OFFSETS, encode_offsets(offsets)))
            self.followed += len(entries)
