"""The RocksDB store at scale: SST files written in bulk and ingested, checkpoints, RocksDB's
statistics, and the options that bound its memory and its write-ahead log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from polling import wait_for

from frontierflow.state.storage.bulk import SortedSstWriter
from frontierflow.state.storage.rocksdb import RocksDBStore
from frontierflow.state.storage.rocksdb_options import RocksDBOptions
from frontierflow.state.storage.store import META_FAMILY, StoreError

FAMILIES = ("ieca",)


def _keys(n: int) -> list[bytes]:
    return [f"https://example.org/{i:08d}".encode() for i in range(n)]


def _commit(store: RocksDBStore, family: str, pairs: dict[bytes, bytes]) -> None:
    with store.transaction() as txn:
        for key, value in pairs.items():
            txn.put(family, key, value)


def test_sorted_pairs_go_into_files_of_the_given_size_and_are_ingested(tmp_path: Path) -> None:
    options = RocksDBOptions()
    writer = SortedSstWriter(tmp_path / "sst", options, file_bytes=1)  # a file per 4,096 keys
    keys = _keys(10_000)
    writer.put_many((key, key[-4:]) for key in keys[:5_000])
    writer.put_many((key, key[-4:]) for key in keys[5_000:])
    files = writer.finish()
    assert writer.written == 10_000
    assert len(files) == 3  # 4,096 + 4,096 + 1,808 keys
    with RocksDBStore(tmp_path / "db", FAMILIES, options) as store:
        store.ingest("ieca", files)
        assert store.get_many("ieca", [keys[0], keys[4_096], keys[-1], b"absent"]) == [
            b"0000",
            b"4096",
            b"9999",
            None,
        ]
        assert sum(1 for _ in store.items("ieca")) == 10_000
    assert not any(f.exists() for f in files)  # moved into the store, not copied


def test_keys_out_of_order_are_refused(tmp_path: Path) -> None:
    writer = SortedSstWriter(tmp_path, RocksDBOptions())
    with pytest.raises(StoreError, match="ascending order"):
        writer.put_many([(b"b", b""), (b"a", b"")])
    with pytest.raises(ValueError, match="file_bytes"):
        SortedSstWriter(tmp_path, RocksDBOptions(), file_bytes=0)


def test_nothing_written_makes_no_file(tmp_path: Path) -> None:
    writer = SortedSstWriter(tmp_path, RocksDBOptions())
    assert writer.finish() == []


def test_a_checkpoint_is_a_copy_of_the_committed_state(tmp_path: Path) -> None:
    with RocksDBStore(tmp_path / "db", FAMILIES) as store:
        _commit(store, "ieca", {b"a": b"1"})
        store.checkpoint(tmp_path / "copy")
        _commit(store, "ieca", {b"b": b"2"})
    with RocksDBStore(tmp_path / "copy", FAMILIES) as copy:
        assert copy.get("ieca", b"a") == b"1"
        assert copy.get("ieca", b"b") is None
        _commit(copy, "ieca", {b"c": b"3"})
    with RocksDBStore(tmp_path / "db", FAMILIES) as store:
        assert store.get("ieca", b"c") is None


def test_statistics_count_the_bytes_of_each_write_batch(tmp_path: Path) -> None:
    """RocksDB's `rocksdb.bytes.written` is the write batches' size: a 12-byte header, then
    per put into a column family other than RocksDB's default a type byte, the family's id,
    the key's length, the key, the value's length and the value (lengths as one-byte
    varints here)."""
    store = RocksDBStore(tmp_path, FAMILIES, RocksDBOptions(statistics=True))
    # opening a new directory wrote the format version: meta "store.format" -> 8 bytes
    assert store.statistics()["rocksdb.bytes.written"] == 12 + (1 + 1 + 1 + 12 + 1 + 8)
    _commit(store, "ieca", {b"k2": b"v2"})
    _commit(store, META_FAMILY, {b"a": b"b"})
    store.close()
    written = 36 + (12 + 1 + 1 + 1 + 2 + 1 + 2) + (12 + 1 + 1 + 1 + 1 + 1 + 1)
    assert store.statistics()["rocksdb.bytes.written"] == written  # readable after close
    assert store.statistics()["rocksdb.wal.bytes"] == written


def test_statistics_are_off_unless_asked(tmp_path: Path) -> None:
    with RocksDBStore(tmp_path, FAMILIES) as store:
        _commit(store, "ieca", {b"k": b"v"})
        assert store.statistics() == {}


def test_index_and_filters_in_the_cache_leave_the_table_readers_small(tmp_path: Path) -> None:
    """A 10-bit Bloom filter of 100,000 keys is 1,000,000 bits, 125,000 bytes: held by the
    open file outside the block cache, or charged to the cache and not to the file."""
    keys = _keys(100_000)
    memory = {}
    for inside in (False, True):
        options = RocksDBOptions(
            index_and_filters_in_cache=inside, partitioned_index_and_filters=inside
        )
        writer = SortedSstWriter(tmp_path / f"sst-{inside}", options)
        writer.put_many((key, b"v") for key in keys)
        with RocksDBStore(tmp_path / f"db-{inside}", FAMILIES, options) as store:
            store.ingest("ieca", writer.finish())
            assert store.get("ieca", keys[7]) == b"v"
            memory[inside] = store.property_int("ieca", "rocksdb.estimate-table-readers-mem")
    assert memory[False] >= 125_000
    assert memory[True] < 125_000 // 10


def test_only_the_url_families_have_bloom_filters(tmp_path: Path) -> None:
    with RocksDBStore(tmp_path, FAMILIES) as store:
        _commit(store, "ieca", {b"k": b"v"})
        _commit(store, META_FAMILY, {b"m": b"v"})
        store._flush_all()
        meta = store._view(META_FAMILY).property_value("rocksdb.aggregated-table-properties")
        ieca = store._view("ieca").property_value("rocksdb.aggregated-table-properties")
    assert "filter block size=0;" in meta
    assert "filter block size=0;" not in ieca


def test_memtables_are_charged_to_the_block_cache(tmp_path: Path) -> None:
    """2 MB of writes in a memtable: with a memtable budget the block cache holds as much
    (the budget's reservations), without one it holds nothing but what was read."""
    usage = {}
    for budget in (0, 64 * 1024 * 1024):
        options = RocksDBOptions(memtable_budget=budget)
        with RocksDBStore(tmp_path / f"db-{budget}", FAMILIES, options) as store:
            _commit(store, "ieca", {f"{i:06d}".encode(): b"x" * 1000 for i in range(2_000)})
            memtables = store.property_int("ieca", "rocksdb.cur-size-all-mem-tables")
            usage[budget] = store.property_int("ieca", "rocksdb.block-cache-usage")
    assert memtables > 2_000_000
    assert usage[0] < 100_000
    assert usage[64 * 1024 * 1024] >= memtables


def _wal_bytes(path: Path) -> int:
    return sum(e.stat().st_size for e in os.scandir(path) if e.name.endswith(".log"))


def test_the_wal_is_bounded_by_max_total_wal_size(tmp_path: Path) -> None:
    """A `meta` key written first keeps every log file alive until `meta` is flushed,
    however often the URL family's memtable is: unbounded, the logs hold all 8 MiB
    written once the flushes are done; with a 1 MiB bound, `meta` is flushed and the old
    logs go (deleted by RocksDB's background work, which a loaded machine delays: the test
    waits for it, with a deadline)."""
    mib = 1024 * 1024
    value = b"x" * 1000
    wal = {}
    for bound in (0, mib):
        options = RocksDBOptions(write_buffer_size=mib, max_total_wal_size=bound)
        path = tmp_path / f"db-{bound}"
        with RocksDBStore(path, FAMILIES, options) as store:
            _commit(store, META_FAMILY, {b"position": b"0"})
            for batch in range(64):  # 64 batches of 128 values of 1,000 bytes: 8.2 MB
                _commit(store, "ieca", {f"{batch}/{i}".encode(): value for i in range(128)})
            wait_for(lambda store=store: _flushes_done(store), "the memtables' flushes")
            if bound:
                wait_for(lambda path=path: _wal_bytes(path) < 3 * mib, "the old logs gone")
            wal[bound] = _wal_bytes(path)
    assert wal[0] > 8 * 1_000_000
    assert wal[mib] < 3 * mib


def _flushes_done(store: RocksDBStore) -> bool:
    return not any(
        store.property_int(family, name)
        for family in (*FAMILIES, META_FAMILY)
        for name in ("rocksdb.num-running-flushes", "rocksdb.mem-table-flush-pending")
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("compression", "snappy"),
        ("bottommost_compression", "gzip"),
        ("max_total_wal_size", -1),
        ("memtable_budget", -1),
        ("memtable_budget", 1024 * 1024 * 1024),
        ("meta_write_buffer_size", 0),
        ("block_size", 0),
        ("metadata_block_size", 0),
    ],
)
def test_options_refuse_what_rocksdb_cannot_use(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        RocksDBOptions(**{field: value})  # type: ignore[arg-type]
