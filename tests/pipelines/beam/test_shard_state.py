"""Shard-keyed state: the records bag (appends, latest wins, compaction) and the in-memory
copies validated by generation, worked by hand against a bag that counts its requests."""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from apache_beam.coders import BytesCoder, VarIntCoder
from beam_state import Bag

from frontierflow.pipelines.beam import shard_state
from frontierflow.pipelines.beam.shard_state import (
    RecordChunks,
    ShardIndex,
    ShardIndexes,
    ShardStore,
    needs_compaction,
    state_shard,
)


def _records(store: ShardStore, bag: Bag) -> list[tuple[str, Any]]:
    return [r for chunk in bag.items for r in store.chunks.decode(chunk)]


def test_state_shard_is_crc32_of_the_url_modulo_the_shards() -> None:
    url = "http://a.example/x"
    assert state_shard(url, 64) == zlib.crc32(url.encode()) % 64
    assert state_shard(url) == state_shard(url, shard_state.STATE_SHARDS)
    assert {state_shard(f"http://h/{i}", 8) for i in range(200)} == set(range(8))


def test_record_chunks_round_trip_values_and_removals() -> None:
    chunks = RecordChunks(VarIntCoder())
    records = [("http://a/", 3), ("http://b/", None), ("http://ü/", 0)]
    assert chunks.decode(chunks.encode(records)) == records


@pytest.mark.parametrize(
    ("records", "live", "compact"),
    [
        (2_000, 1_000, False),  # 1,000 superseded: not more than the 1,000 live
        (4_100, 2_000, True),  # 2,100 superseded > 2,000 live, and >= 1,024
        (2_001, 1_000, False),  # 1,001 superseded > 1,000 live, but fewer than 1,024
        (1_500, 100, True),  # 1,400 superseded > 100 live, and >= 1,024
        (1_123, 100, False),  # 1,023 superseded: fewer than MIN_SUPERSEDED
        (0, 0, False),
    ],
)
def test_compaction_when_superseded_records_outnumber_live_ones(
    records: int, live: int, compact: bool
) -> None:
    assert shard_state.MIN_SUPERSEDED == 1_024
    assert needs_compaction(records, live) is compact


def test_a_new_shard_reads_no_bag_and_a_window_appends_only_its_changes() -> None:
    store, bag = ShardStore(BytesCoder(), ShardIndexes()), Bag()
    index = store.load(5, None, bag)
    assert (index.values, index.records, bag.reads) == ({}, 0, 0)  # never written: no read
    g1 = store.commit(5, index, {"http://a/": b"1", "http://b/": b"2"}, bag)
    assert g1 is not None and index.generation == g1
    assert (bag.adds, bag.clears) == (1, 0)  # one chunk for the window
    g2 = store.commit(5, index, {"http://a/": b"1", "http://c/": b"3"}, bag)  # a unchanged
    assert g2 not in (None, g1)
    assert _records(store, bag) == [
        ("http://a/", b"1"),
        ("http://b/", b"2"),
        ("http://c/", b"3"),  # only c: a's value did not change
    ]
    assert store.commit(5, index, {"http://b/": b"2"}, bag) == g2  # nothing changed: no write
    assert (bag.adds, index.records) == (2, 3)


def test_the_latest_record_wins_and_none_removes_a_url_when_rebuilt() -> None:
    store, bag = ShardStore(BytesCoder(), ShardIndexes()), Bag()
    index = store.load(0, None, bag)
    store.commit(0, index, {"http://a/": b"1", "http://b/": b"2"}, bag)
    store.commit(0, index, {"http://a/": b"9", "http://b/": None}, bag)
    generation = store.commit(0, index, {"http://c/": b"3", "http://gone/": None}, bag)
    # the tombstone of a URL that never had a value is no change: not written
    assert _records(store, bag) == [
        ("http://a/", b"1"),
        ("http://b/", b"2"),
        ("http://a/", b"9"),
        ("http://b/", None),
        ("http://c/", b"3"),
    ]
    rebuilt = ShardStore(BytesCoder(), ShardIndexes())  # another process: no copy
    rebuilt.chunks = store.chunks
    again = rebuilt.load(0, generation, bag)
    assert again.values == {"http://a/": b"9", "http://c/": b"3"}
    assert again.records == 5 and again.generation == generation
    assert bag.reads == 1


def test_the_copy_is_used_only_for_its_generation() -> None:
    indexes = ShardIndexes()
    store, bag = ShardStore(BytesCoder(), indexes), Bag()
    index = store.load(3, None, bag)
    generation = store.commit(3, index, {"http://a/": b"1"}, bag)
    assert store.load(3, generation, bag) is index and bag.reads == 0  # the copy, no read
    # a restore rolled the state back to before that write: the bag is empty again and
    # the timer cell holds no generation; the copy is of a generation the state lacks
    bag.items = []
    rolled_back = store.load(3, None, bag)
    assert rolled_back is not index and rolled_back.values == {} and bag.reads == 0
    # another generation than the copy's (a write this process did not see): rebuilt
    other = ShardStore(BytesCoder(), ShardIndexes())
    other.step = store.step
    written = other.commit(3, other.load(3, None, bag), {"http://z/": b"7"}, bag)
    assert store.load(3, written, bag).values == {"http://z/": b"7"} and bag.reads == 1


def test_a_failed_bundle_leaves_a_copy_that_never_matches_the_state() -> None:
    indexes = ShardIndexes()
    store, bag = ShardStore(BytesCoder(), indexes), Bag()
    committed = store.commit(1, store.load(1, None, bag), {"http://a/": b"1"}, bag)
    kept = list(bag.items)
    index = store.load(1, committed, bag)
    store.commit(1, index, {"http://a/": b"2"}, bag)  # the bundle then fails: not committed
    bag.items = kept  # the runner keeps the state as it was
    assert store.load(1, committed, bag).values == {"http://a/": b"1"}  # rebuilt, not b"2"


def test_compaction_rewrites_the_live_records_in_chunks() -> None:
    store, bag = ShardStore(VarIntCoder(), ShardIndexes()), Bag()
    index = store.load(2, None, bag)
    urls = [f"http://h/{i}" for i in range(600)]
    store.commit(2, index, {u: 0 for u in urls}, bag)  # 600 records, 600 live
    store.commit(2, index, {u: 1 for u in urls}, bag)  # 1,200 records: 600 superseded
    assert (bag.clears, index.records) == (0, 1_200)
    store.commit(2, index, {u: 2 for u in urls}, bag)  # 1,800: 1,200 superseded > 600 live
    assert bag.clears == 1 and index.records == 600
    assert dict(_records(store, bag)) == {u: 2 for u in urls}
    assert len(_records(store, bag)) == 600


def test_compaction_splits_a_large_shard_into_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shard_state, "CHUNK_RECORDS", 250)
    store, bag = ShardStore(VarIntCoder(), ShardIndexes()), Bag()
    index = store.load(2, None, bag)
    urls = [f"http://h/{i}" for i in range(600)]
    for value in range(3):
        store.commit(2, index, {u: value for u in urls}, bag)
    assert [len(store.chunks.decode(c)) for c in bag.items] == [250, 250, 100]


def test_least_recently_used_shards_are_dropped_past_the_bound() -> None:
    indexes = ShardIndexes(max_urls=5)
    indexes.keep("s", 0, ShardIndex(1, {"a": 1, "b": 1}))
    indexes.keep("s", 1, ShardIndex(2, {"c": 1, "d": 1}))
    assert indexes.get("s", 0, 1) is not None  # shard 0 is now the most recent
    indexes.keep("s", 2, ShardIndex(3, {"e": 1, "f": 1}))  # 6 URLs > 5: drop shard 1
    assert len(indexes) == 2
    assert indexes.get("s", 1, 2) is None
    assert indexes.get("s", 0, 1) is not None and indexes.get("s", 2, 3) is not None
    assert indexes.get("t", 0, 1) is None  # another step's copies are its own
