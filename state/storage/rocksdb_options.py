"""Every RocksDB setting of the state store, in one frozen dataclass validated once.

`RocksDBOptions` turns into the rocksdict objects a store opens with: one `Options` for the
per-URL families (point reads, most of them for URLs never seen: Bloom filters) and one
for the `meta` family (a few keys rewritten every commit), one block cache shared by all,
the write options of a commit. What each setting does to the rate, the memory and the
bytes on disk at 1M and 100M URLs is measured by `frontierflow bench --scale`.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocksdict import (
    BlockBasedIndexType,
    BlockBasedOptions,
    Cache,
    DBCompressionType,
    Options,
    WriteBufferManager,
    WriteOptions,
)

_MIB = 1024 * 1024

COMPRESSIONS = ("none", "lz4", "zstd")
"""The block compressions a store may use (`RocksDBOptions.compression`)."""


def _compression_type(name: str) -> DBCompressionType:
    return {
        "none": DBCompressionType.none,
        "lz4": DBCompressionType.lz4,
        "zstd": DBCompressionType.zstd,
    }[name]()


@dataclass(frozen=True)
class RocksDBOptions:
    """How the store tunes RocksDB; validated once, turned into rocksdict objects on open.

    The write-ahead log is always on: a committed batch survives `kill -9` of the process.
    `sync_writes` also fsyncs the log on each commit, so it survives a crash of the OS or a
    power loss, at the cost of one fsync per commit.

    Memory: with `index_and_filters_in_cache` and a `memtable_budget` (the defaults),
    everything RocksDB holds for reads and writes — data blocks, index and filter blocks,
    memtables — is charged to the one block cache of `block_cache_size`, so the store's
    memory is bounded by that number whatever the number of keys (the cache's limit is
    soft: a block being read may pass it briefly).
    """

    write_buffer_size: int = 64 * _MIB
    """Memtable size per column family before it is flushed to an SST file."""
    max_write_buffer_number: int = 3
    max_open_files: int = -1
    """-1 keeps every SST file open (RocksDB's default)."""
    compression: str = "none"
    """Block compression of the SST files above the last level: none, lz4 or zstd."""
    bottommost_compression: str = "none"
    """Block compression of the last level, where most of the data of a large store lies.
    None by default: with 100M URLs in state most reads of a known URL miss the block cache
    and take a block from the page cache, and an uncompressed block spares each such read
    a decompression and a second buffer (at 100M URLs 0.81–0.82 of the 1M rate against
    0.66–0.72 with lz4 in the same runs, for 1.75 times the bytes on the disk: `frontierflow bench
    --scale --scale-urls 1M,100M --repeats 3 --scale-variants default,lz4`). lz4 or zstd
    where the disk, or the page cache, is short; a store's files each say how their blocks
    are compressed, so the setting can change between opens."""
    sync_writes: bool = False
    block_cache_size: int = 512 * _MIB
    """One LRU block cache shared by all column families of the store."""
    bloom_filter_bits_per_key: int = 10
    """Bloom filter on SST blocks, so point reads of absent keys rarely touch disk; 0 off."""
    memtable_bloom_ratio: float = 0.02
    """A whole-key Bloom filter in each memtable, of this share of `write_buffer_size`
    (0.02 of 64 MiB: ~10 bits for each of ~1M keys); 0 off. A URL seen for the first time
    is a read that finds nothing; with the filter it skips the memtable's search (200,000
    such reads: 0.09–0.14 CPU s against 0.25–0.31 without, in a stand-alone measurement)."""
    index_and_filters_in_cache: bool = True
    """Index and filter blocks live in the block cache (and count against its size), those
    of level-0 files and the top level of partitioned ones pinned there; off, every open
    SST file holds its own outside the cache, ~1.3 bytes a key for a 10-bit filter."""
    partitioned_index_and_filters: bool = True
    """Two-level index and partitioned filters: an SST file's index and filter are cut
    into blocks of `metadata_block_size`, so the cache holds the parts that are read."""
    metadata_block_size: int = 4096
    memtable_budget: int = 128 * _MIB
    """Memory of all memtables together, charged to the block cache (a
    `WriteBufferManager`): past it the largest memtable is flushed, so memtables and
    cached blocks share one bound and the memtables never take more than this of it;
    0: no budget, each family's memtables outside the cache."""
    max_total_wal_size: int = 128 * _MIB
    """Write-ahead log size at which the families holding its oldest part are flushed;
    0: RocksDB's default (4 × the memtables of all families). What a restart after
    `kill -9` replays is bounded by it."""
    meta_write_buffer_size: int = 8 * _MIB
    """Memtable size of the `meta` family (positions, counters, host states)."""
    block_size: int = 4096
    """Uncompressed size of a data block: what a point read of a key not cached reads."""
    statistics: bool = False
    """Count RocksDB's tickers (bytes written, flushed, compacted) for
    `RocksDBStore.statistics`; costs a little on every operation."""

    def __post_init__(self) -> None:
        positive = {
            "write_buffer_size": self.write_buffer_size,
            "max_write_buffer_number": self.max_write_buffer_number,
            "block_cache_size": self.block_cache_size,
            "meta_write_buffer_size": self.meta_write_buffer_size,
            "block_size": self.block_size,
            "metadata_block_size": self.metadata_block_size,
        }
        for name, value in positive.items():
            if value <= 0:
                raise ValueError(f"RocksDBOptions.{name} must be positive, got {value}")
        if self.max_open_files == 0 or self.max_open_files < -1:
            raise ValueError(
                f"RocksDBOptions.max_open_files must be -1 or positive, got {self.max_open_files}"
            )
        if not 0.0 <= self.memtable_bloom_ratio <= 0.25:
            raise ValueError(
                "RocksDBOptions.memtable_bloom_ratio must be in [0, 0.25], "
                f"got {self.memtable_bloom_ratio}"
            )
        if self.bloom_filter_bits_per_key < 0:
            raise ValueError(
                "RocksDBOptions.bloom_filter_bits_per_key must be >= 0, "
                f"got {self.bloom_filter_bits_per_key}"
            )
        if self.memtable_budget < 0 or self.memtable_budget > self.block_cache_size:
            raise ValueError(
                "RocksDBOptions.memtable_budget must be in [0, block_cache_size], "
                f"got {self.memtable_budget}"
            )
        if self.max_total_wal_size < 0:
            raise ValueError(
                f"RocksDBOptions.max_total_wal_size must be >= 0, got {self.max_total_wal_size}"
            )
        for field, compression in (
            ("compression", self.compression),
            ("bottommost_compression", self.bottommost_compression),
        ):
            if compression not in COMPRESSIONS:
                raise ValueError(
                    f"RocksDBOptions.{field}: one of {', '.join(COMPRESSIONS)}, got {compression!r}"
                )

    def open_options(self) -> StoreOptions:
        """The rocksdict objects of one store: they share one block cache."""
        cache = Cache(self.block_cache_size)
        families = self._options(cache, self.write_buffer_size, bloom=True)
        meta = self._options(cache, self.meta_write_buffer_size, bloom=False)
        if self.memtable_budget:
            manager = WriteBufferManager.new_write_buffer_manager_with_cache(
                self.memtable_budget, False, cache
            )
            for options in (families, meta):
                options.set_write_buffer_manager(manager)
        return StoreOptions(families, meta, self.write_options())

    def sst_options(self) -> Options:
        """Options for writing SST files to be ingested: the table layout of the store's
        per-URL families."""
        return self._options(Cache(self.block_cache_size), self.write_buffer_size, bloom=True)

    def write_options(self) -> WriteOptions:
        """`rocksdict.WriteOptions` for commits: WAL on, fsync as `sync_writes` says."""
        write_options = WriteOptions()
        write_options.sync = self.sync_writes
        return write_options

    def _options(self, cache: Cache, write_buffer_size: int, *, bloom: bool) -> Options:
        """Raw-mode `rocksdict.Options` for the database or one kind of column family."""
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        options.set_write_buffer_size(write_buffer_size)
        options.set_max_write_buffer_number(self.max_write_buffer_number)
        options.set_max_open_files(self.max_open_files)
        options.set_compression_type(_compression_type(self.compression))
        options.set_bottommost_compression_type(_compression_type(self.bottommost_compression))
        if self.max_total_wal_size:
            options.set_max_total_wal_size(self.max_total_wal_size)
        if self.statistics:
            options.enable_statistics()
        options.set_block_based_table_factory(self._table_options(cache, bloom))
        if bloom and self.memtable_bloom_ratio:
            options.set_memtable_prefix_bloom_ratio(self.memtable_bloom_ratio)
            options.set_memtable_whole_key_filtering(True)
        return options

    def _table_options(self, cache: Cache, bloom: bool) -> BlockBasedOptions:
        table = BlockBasedOptions()
        table.set_block_cache(cache)
        table.set_block_size(self.block_size)
        if bloom and self.bloom_filter_bits_per_key:
            table.set_bloom_filter(self.bloom_filter_bits_per_key, False)
        if self.index_and_filters_in_cache:
            table.set_cache_index_and_filter_blocks(True)
            table.set_pin_l0_filter_and_index_blocks_in_cache(True)
            table.set_pin_top_level_index_and_filter(True)
        if self.partitioned_index_and_filters:
            table.set_index_type(BlockBasedIndexType.two_level_index_search())
            table.set_partition_filters(True)
            table.set_metadata_block_size(self.metadata_block_size)
        return table


@dataclass(frozen=True)
class StoreOptions:
    """The rocksdict objects one store opens with."""

    families: Options
    """The database's options and those of every family but `meta`."""
    meta: Options
    """The `meta` family's."""
    write: WriteOptions
