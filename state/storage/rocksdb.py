"""The durable state store of the embedded engine: RocksDB through rocksdict, raw bytes.

Each family is a RocksDB column family; a transaction buffers its writes and commits them
in one `WriteBatch` across families, through the write-ahead log, so a step survives a
killed process (and, with `sync_writes`, a lost machine) whole or not at all.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice, repeat
from pathlib import Path
from types import TracebackType
from typing import cast

from rocksdict import (
    BlockBasedOptions,
    Cache,
    ColumnFamily,
    DBCompressionType,
    Options,
    Rdict,
    WriteBatch,
    WriteOptions,
)

from frontierflow.state.storage.format import (
    NEW_STORE,
    STORE_FORMAT,
    STORE_FORMAT_KEY,
    stored_format,
    upgrade_changes,
)
from frontierflow.state.storage.store import (
    META_FAMILY,
    BufferedTransaction,
    Changes,
    StoreError,
    check_family,
    with_meta,
)

logger = logging.getLogger(__name__)

_MIB = 1024 * 1024
_DEFAULT_FAMILY = "default"
"""RocksDB's own column family, always present; opened implicitly, never listed."""

_ITEMS_CHUNK = 1024
"""`items` reads this many entries per RocksDB iterator, so no native iterator outlives
a chunk (a live one would keep the database open after `close`)."""


@dataclass(frozen=True)
class RocksDBOptions:
    """How the store tunes RocksDB; validated once, turned into rocksdict objects on open.

    The write-ahead log is always on: a committed batch survives `kill -9` of the process.
    `sync_writes` also fsyncs the log on each commit, so it survives a crash of the OS or a
    power loss, at the cost of one fsync per commit.
    """

    write_buffer_size: int = 64 * _MIB
    """Memtable size per column family before it is flushed to an SST file."""
    max_write_buffer_number: int = 3
    max_open_files: int = -1
    """-1 keeps every SST file open (RocksDB's default)."""
    compression: bool = True
    """LZ4 on SST blocks; off stores them raw."""
    sync_writes: bool = False
    block_cache_size: int = 64 * _MIB
    """One LRU block cache shared by all column families of the store."""
    bloom_filter_bits_per_key: int = 10
    """Bloom filter on SST blocks, so point reads of absent keys rarely touch disk; 0 off."""
    memtable_bloom_ratio: float = 0.02
    """A whole-key Bloom filter in each memtable, of this share of `write_buffer_size`
    (0.02 of 64 MiB: ~10 bits for each of ~1M keys); 0 off. A URL seen for the first time
    is a read that finds nothing; with the filter it skips the memtable's search (200,000
    such reads: 0.09–0.14 CPU s against 0.25–0.31 without, in a stand-alone measurement)."""

    def __post_init__(self) -> None:
        positive = {
            "write_buffer_size": self.write_buffer_size,
            "max_write_buffer_number": self.max_write_buffer_number,
            "block_cache_size": self.block_cache_size,
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

    def to_rocksdict(self) -> Options:
        """Raw-mode `rocksdict.Options` for the database and each of its column families."""
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        options.set_write_buffer_size(self.write_buffer_size)
        options.set_max_write_buffer_number(self.max_write_buffer_number)
        options.set_max_open_files(self.max_open_files)
        compression = DBCompressionType.lz4() if self.compression else DBCompressionType.none()
        options.set_compression_type(compression)
        options.set_block_based_table_factory(self._table_options())
        if self.memtable_bloom_ratio:
            options.set_memtable_prefix_bloom_ratio(self.memtable_bloom_ratio)
            options.set_memtable_whole_key_filtering(True)
        return options

    def write_options(self) -> WriteOptions:
        """`rocksdict.WriteOptions` for commits: WAL on, fsync as `sync_writes` says."""
        write_options = WriteOptions()
        write_options.sync = self.sync_writes
        return write_options

    def _table_options(self) -> BlockBasedOptions:
        table = BlockBasedOptions()
        table.set_block_cache(Cache(self.block_cache_size))
        if self.bloom_filter_bits_per_key:
            table.set_bloom_filter(self.bloom_filter_bits_per_key, False)
        return table


class RocksDBTransaction(BufferedTransaction):
    """A transaction on a `RocksDBStore`; `commit` writes one `WriteBatch`."""

    def __init__(self, store: RocksDBStore) -> None:
        super().__init__(store)
        self._rocksdb = store

    def _write(self, changes: Changes) -> None:
        self._rocksdb._write_batch(changes)


class RocksDBStore:
    """A `StateStore` in a RocksDB directory, one column family per family.

    Families missing from the directory are created on open. Column families the
    directory has but `families` does not name are opened too (RocksDB requires it) and
    left untouched. Keys iterate in bytewise order. A new directory records the store
    format; one of format 1 is migrated on open, one of a newer format refused
    (`frontierflow.state.storage.format`).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        families: Iterable[str],
        options: RocksDBOptions | None = None,
    ) -> None:
        self.families: tuple[str, ...] = with_meta(families)
        self.path = Path(path)
        self.options = options if options is not None else RocksDBOptions()
        self._write_options = self.options.write_options()
        self._db, self._db_families = self._open()
        self._views = {name: self._db.get_column_family(name) for name in self.families}
        self._handles = {name: self._db.get_column_family_handle(name) for name in self.families}
        self._closed = False
        try:
            self._settle_format()
        except BaseException:
            self.close()
            raise
        logger.debug("opened RocksDB store at %s with families %s", self.path, self.families)

    def get(self, family: str, key: bytes) -> bytes | None:
        """The committed value of `key` in `family`, or None."""
        return cast(bytes | None, self._view(family).get(key))

    def get_many(self, family: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """Committed values of `keys` in order (None for a miss), in one multi-get."""
        view = self._view(family)
        if not keys:
            return []
        return cast(list[bytes | None], view.get(list(keys)))

    def items(self, family: str) -> Iterator[tuple[bytes, bytes]]:
        """Every committed (key, value) of `family` in bytewise key order.

        Read in chunks of fresh iterators, so a write committed during the iteration may
        or may not be seen, and the store may be closed before the iterator is exhausted
        (the next chunk then raises `StoreError`).
        """
        self._view(family)
        return self._iter_items(family)

    def estimate_keys(self, family: str) -> int:
        """RocksDB's estimate of the keys in `family` (cheap; exact only after compaction)."""
        value = self._view(family).property_int_value("rocksdb.estimate-num-keys")
        return int(value or 0)

    def transaction(self) -> RocksDBTransaction:
        """A new transaction whose `commit` writes one atomic batch."""
        self._check_open()
        return RocksDBTransaction(self)

    def close(self) -> None:
        """Flush the memtables and close the database; closing twice is harmless."""
        if self._closed:
            return
        self._closed = True
        self._flush_all()
        # Column family views and handles keep the native database (and its LOCK) alive.
        self._views.clear()
        self._handles.clear()
        self._db.close()
        logger.debug("closed RocksDB store at %s", self.path)

    def __enter__(self) -> RocksDBStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _open(self) -> tuple[Rdict, tuple[str, ...]]:
        """The database and every column family it has (`default` excluded)."""
        db_options = self.options.to_rocksdict()
        names = [*self.families, *self._existing_families(db_options)]
        column_families = {name: db_options for name in dict.fromkeys(names)}
        column_families.pop(_DEFAULT_FAMILY, None)
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            db = Rdict(str(self.path), db_options, column_families=column_families)
        except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
            raise StoreError(f"cannot open RocksDB at {self.path}: {exc}") from exc
        return db, tuple(column_families)

    def _settle_format(self) -> None:
        """Record the format of a new directory, or migrate an older one in one batch."""
        version = stored_format(self.get(META_FAMILY, STORE_FORMAT_KEY), self._has_data())
        if version == STORE_FORMAT:
            return
        changes = upgrade_changes(version, self._read_any_family, self._db_families)
        handles = {name: self._db.get_column_family_handle(name) for name in changes}
        self._write_batch(changes, handles)
        if version != NEW_STORE:
            logger.warning(
                "migrated the state directory %s from store format %d to %d",
                self.path,
                version,
                STORE_FORMAT,
            )

    def _has_data(self) -> bool:
        """Whether any column family (those not opened by name included) holds a key."""
        for name in self._db_families:
            if self._read_chunk(self._db.get_column_family(name), b"", limit=1):
                return True
        return bool(self._read_chunk(self._db, b"", limit=1))

    def _read_any_family(self, family: str) -> list[tuple[bytes, bytes]]:
        """Every entry of a column family of the directory, opened by name or not."""
        view = self._db.get_column_family(family)
        out: list[tuple[bytes, bytes]] = []
        start = b""
        while chunk := self._read_chunk(view, start):
            out += chunk
            start = chunk[-1][0] + b"\x00"
        return out

    def _existing_families(self, db_options: Options) -> list[str]:
        if not (self.path / "CURRENT").exists():
            return []
        return Rdict.list_cf(str(self.path), db_options)

    def _iter_items(self, family: str) -> Iterator[tuple[bytes, bytes]]:
        start = b""
        while True:
            chunk = self._read_chunk(self._view(family), start)
            yield from chunk
            if len(chunk) < _ITEMS_CHUNK:
                return
            start = chunk[-1][0] + b"\x00"  # the smallest key after the last one read

    @staticmethod
    def _read_chunk(
        view: Rdict, start: bytes, limit: int = _ITEMS_CHUNK
    ) -> list[tuple[bytes, bytes]]:
        entries = cast(Iterator[tuple[bytes, bytes]], view.items(from_key=start))
        return list(islice(entries, limit))

    def _write_batch(
        self, changes: Changes, handles: Mapping[str, ColumnFamily] | None = None
    ) -> None:
        """Write all `changes` in one `WriteBatch` across column families (those of
        `handles` when given, else the store's own)."""
        batch = WriteBatch(raw_mode=True)
        put, delete = batch.put, batch.delete
        for family, family_changes in changes.items():
            handle = self._handle(family) if handles is None else handles[family]
            if None not in family_changes.values():  # puts only: one C-level pass
                deque(map(put, family_changes, family_changes.values(), repeat(handle)), 0)
                continue
            for key, value in family_changes.items():
                if value is None:
                    delete(key, handle)
                else:
                    put(key, value, handle)
        if batch.is_empty():
            return
        try:
            self._db.write(batch, self._write_options)
        except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
            raise StoreError(f"commit to RocksDB at {self.path} failed: {exc}") from exc

    def _flush_all(self) -> None:
        for view in self._views.values():
            view.flush()

    def _view(self, family: str) -> Rdict:
        self._check_open()
        check_family(self.families, family)
        return self._views[family]

    def _handle(self, family: str) -> ColumnFamily:
        self._check_open()
        check_family(self.families, family)
        return self._handles[family]

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"RocksDB store at {self.path} is closed")
