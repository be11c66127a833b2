"""Shard-keyed state for the unbounded form's per-URL steps: a step keyed by a shard of the
URL (`state_shard`) keeps all of that shard's URL values in two Beam state cells, so a
bundle or a clock window touches a few shard cells instead of one cell per URL.

Why: each state cell a key touches costs the Python SDK a request to the runner (on Flink a
gRPC round trip of ~0.7 ms), and in a crawl nearly every URL a window touches is new to the
step, so the SDK's user-state cache cannot answer for it (`docs/RESULTS.md`, the
`bench-kafka --beam-stream` section). Keyed by shard, a step pays its requests per shard.

A shard's cells (all state stays in Beam state, so a checkpoint restore rolls it back):

- the step's timer-ordered cell (`beam.event_time.held_coder`), whose value is the shard's
  **generation**: a random number drawn anew at every write of the records bag;
- the **records bag**: chunks of `(url, value)` records, appended, the latest record of a
  URL winning (a `None` value removes the URL). A window appends only the records it
  changed; when superseded records outnumber live ones (`needs_compaction`), the bag is
  cleared and rewritten with the live records alone, so each record written costs at most
  one more write later (amortised O(changes), not O(shard), per window). A chunk is one
  bag element of encoded bytes: the SDK's state cache (when on) weighs a cached bag at
  every append by walking it, which for decoded records would cost O(shard) per append.

A decoded copy of each shard (`ShardIndex`) is kept in memory, process-wide, per step
(`ShardIndexes`), only as a cache: it is used when its generation equals the one just read
from the timer cell, and rebuilt from the records bag otherwise (first touch, eviction,
another process's write, a restore that rolled the state back). A write gives the copy a
new generation before it changes it, so a copy whose bundle failed never matches the
state again. Its size is bounded (`MAX_CACHED_URLS`, least recently used shards go first).
"""

from __future__ import annotations

import secrets
import threading
import zlib
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from apache_beam.coders import (
    BytesCoder,
    Coder,
    ListCoder,
    NullableCoder,
    StrUtf8Coder,
    TupleCoder,
)
from apache_beam.transforms.userstate import BagStateSpec

STATE_SHARDS = 8
"""Shards of the URL space for the shard-keyed steps (chosen by measurement,
`docs/results/beam.md`, "The clock window and the shard count"): every timer-ordered step
fires once per shard key and window, so fewer keys mean less per window (8 against 64
took the latency at 1M URLs from 31 s to 11 s at p50), while a few per worker slot keep
them spread over Flink's key groups. Part of the job's state layout: a savepoint resumes
only with the count it was taken with."""

MAX_CACHED_URLS = 16_000_000
"""URLs whose decoded values a process keeps in memory, over every step's shards; past it
the least recently used shards are dropped (and rebuilt from state when next touched).
A URL of ~50 characters with a 12-byte state takes ~175 bytes here: ~2.8 GB at the bound.
Every window touches nearly every shard of the update step, so a bound below the URLs a
worker holds makes each window rebuild shards (~1.6 s per million URLs)."""

CHUNK_RECORDS = 4_096
"""Records per bag element when a shard is rewritten whole (bounds one element's size)."""

MIN_SUPERSEDED = 1_024
"""A shard is not compacted for fewer superseded records than this (small shards)."""

RECORDS_STATE = "records"


def state_shard(url: str, shards: int = STATE_SHARDS) -> int:
    """The shard of a URL: CRC-32 of its UTF-8 bytes, stable across processes."""
    return zlib.crc32(url.encode()) % shards


def records_spec() -> BagStateSpec:
    """A shard's records bag: each element one encoded chunk (`RecordChunks`)."""
    return BagStateSpec(RECORDS_STATE, BytesCoder())


def new_generation() -> int:
    """A generation: random, so no rolled-back or concurrent write can reuse one."""
    return secrets.randbits(63)


def needs_compaction(records: int, live: int) -> bool:
    """Rewrite the bag when superseded records outnumber live ones (and are not few)."""
    superseded = records - live
    return superseded > live and superseded >= MIN_SUPERSEDED


class RecordChunks:
    """Encodes (url, value or None) records to one bag element and back."""

    def __init__(self, value_coder: Coder) -> None:
        self._coder = ListCoder(TupleCoder([StrUtf8Coder(), NullableCoder(value_coder)]))

    def encode(self, records: list[tuple[str, Any]]) -> bytes:
        return self._coder.encode(records)

    def decode(self, chunk: bytes) -> list[tuple[str, Any]]:
        return self._coder.decode(chunk)


@dataclass(slots=True)
class ShardIndex:
    """A shard's URL values decoded, as of `generation` (None: the bag was never written)."""

    generation: int | None
    values: dict[str, Any] = field(default_factory=dict)
    records: int = 0
    """Records in the bag, live and superseded."""


class ShardIndexes:
    """Process-wide in-memory copies of shards, per step, validated by generation; least
    recently used shards are dropped once more than `max_urls` URLs are held."""

    def __init__(self, max_urls: int = MAX_CACHED_URLS) -> None:
        self.max_urls = max_urls
        self._lock = threading.Lock()
        self._shards: OrderedDict[tuple[str, int], ShardIndex] = OrderedDict()

    def get(self, step: str, shard: int, generation: int | None) -> ShardIndex | None:
        """The copy of (step, shard) if it is of `generation`, else None (and it is dropped)."""
        with self._lock:
            index = self._shards.get((step, shard))
            if index is None:
                return None
            if index.generation != generation:
                del self._shards[(step, shard)]
                return None
            self._shards.move_to_end((step, shard))
            return index

    def keep(self, step: str, shard: int, index: ShardIndex) -> None:
        """Hold `index` as the copy of (step, shard), dropping the oldest past the bound."""
        with self._lock:
            self._shards[(step, shard)] = index
            self._shards.move_to_end((step, shard))
            held = sum(len(i.values) for i in self._shards.values())
            while held > self.max_urls and len(self._shards) > 1:
                _, dropped = self._shards.popitem(last=False)
                held -= len(dropped.values)

    def __len__(self) -> int:
        return len(self._shards)


INDEXES = ShardIndexes()
"""The process's copies (every step instance of every bundle processor shares them)."""


class ShardStore:
    """One step's view of its shards: `load` a shard's index for the generation read from
    state, `commit` a window's changes to it and to the records bag.

    `step` names the step's copies in `INDEXES`: drawn at construction, so every instance
    the runner deserialises of one step shares it, and no other step or pipeline does."""

    def __init__(self, value_coder: Coder, indexes: ShardIndexes | None = None) -> None:
        self.chunks = RecordChunks(value_coder)
        self.step = f"{secrets.randbits(64):016x}"
        self._indexes = indexes

    @property
    def indexes(self) -> ShardIndexes:
        return INDEXES if self._indexes is None else self._indexes

    def load(self, shard: int, generation: int | None, bag: Any) -> ShardIndex:
        """The shard's values as of `generation`: the in-memory copy if it is of that
        generation, else rebuilt from the records bag (not read at all for a shard whose bag
        was never written)."""
        index = self.indexes.get(self.step, shard, generation)
        if index is not None:
            return index
        index = ShardIndex(generation)
        if generation is not None:
            for chunk in bag.read():
                for url, value in self.chunks.decode(chunk):
                    index.records += 1
                    if value is None:
                        index.values.pop(url, None)
                    else:
                        index.values[url] = value
        self.indexes.keep(self.step, shard, index)
        return index

    def compacted(self, index: ShardIndex) -> list[bytes]:
        """The shard's live records as bag elements of at most `CHUNK_RECORDS` each."""
        records = list(index.values.items())
        return [
            self.chunks.encode(records[start : start + CHUNK_RECORDS])
            for start in range(0, len(records), CHUNK_RECORDS)
        ]

    def commit(
        self, shard: int, index: ShardIndex, changes: Mapping[str, Any], bag: Any
    ) -> int | None:
        """Apply `changes` (url → new value, None: removed) to `index` and the records bag;
        returns the generation to write with them (unchanged when nothing changed).

        The index gets its new generation first, so if the bundle fails after this it is
        never taken for the state again."""
        changed = [(url, value) for url, value in changes.items() if index.values.get(url) != value]
        if not changed:
            return index.generation
        index.generation = new_generation()
        for url, value in changed:
            if value is None:
                del index.values[url]
            else:
                index.values[url] = value
        index.records += len(changed)
        if needs_compaction(index.records, len(index.values)):
            bag.clear()
            for chunk in self.compacted(index):
                bag.add(chunk)
            index.records = len(index.values)
        else:
            bag.add(self.chunks.encode(changed))
        self.indexes.keep(self.step, shard, index)
        return index.generation
