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
from itertools import islice, repeat
from pathlib import Path
from types import TracebackType
from typing import cast

from rocksdict import (
    Checkpoint,
    ColumnFamily,
    IngestExternalFileOptions,
    Options,
    Rdict,
    WriteBatch,
)

from frontierflow.state.storage.format import (
    NEW_STORE,
    STORE_FORMAT,
    STORE_FORMAT_KEY,
    stored_format,
    upgrade_changes,
)
from frontierflow.state.storage.rocksdb_options import RocksDBOptions, StoreOptions
from frontierflow.state.storage.store import (
    META_FAMILY,
    BufferedTransaction,
    Changes,
    StoreError,
    check_family,
    with_meta,
)

logger = logging.getLogger(__name__)

_DEFAULT_FAMILY = "default"
"""RocksDB's own column family, always present; opened implicitly, never listed."""

_ITEMS_CHUNK = 1024
"""`items` reads this many entries per RocksDB iterator, so no native iterator outlives
a chunk (a live one would keep the database open after `close`)."""


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
        self._rocksdict: StoreOptions = self.options.open_options()
        self._write_options = self._rocksdict.write
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

    def statistics(self) -> dict[str, int]:
        """RocksDB's tickers since the store was opened (`rocksdb.bytes.written`,
        `rocksdb.flush.write.bytes`, `rocksdb.compact.write.bytes`, ...): empty unless
        `RocksDBOptions.statistics`. Readable after `close` too."""
        text = self._rocksdict.families.get_statistics() or ""
        tickers: dict[str, int] = {}
        for line in text.splitlines():
            name, sep, count = line.partition(" COUNT : ")
            if sep and " " not in name:
                tickers[name] = int(count)
        return tickers

    def property_int(self, family: str, name: str) -> int:
        """A RocksDB integer property of `family` (`rocksdb.block-cache-usage`,
        `rocksdb.total-sst-files-size`, ...; 0 when RocksDB has no value)."""
        return int(self._view(family).property_int_value(name) or 0)

    def ingest(self, family: str, paths: Sequence[Path]) -> None:
        """Move SST files written with `RocksDBOptions.sst_options` (keys sorted, none in
        two files' ranges at once) into `family`: they go to the lowest level they fit,
        with no write through the memtable and the log."""
        view = self._view(family)
        if not paths:
            return
        ingest_options = IngestExternalFileOptions()
        ingest_options.set_move_files(True)
        try:
            view.ingest_external_file([str(p) for p in paths], ingest_options)
        except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
            raise StoreError(f"cannot ingest {len(paths)} SST files into {family}: {exc}") from exc

    def checkpoint(self, path: str | os.PathLike[str]) -> None:
        """A consistent copy of the committed state in the new directory `path`: SST files
        hard-linked when on the same file system, so a copy of a large store is cheap."""
        self._check_open()
        self._flush_all()
        try:
            Checkpoint(self._db).create_checkpoint(str(path))
        except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
            raise StoreError(f"cannot checkpoint {self.path} to {path}: {exc}") from exc

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
        db_options, meta_options = self._rocksdict.families, self._rocksdict.meta
        names = [*self.families, *self._existing_families(db_options)]
        column_families = {
            name: meta_options if name == META_FAMILY else db_options
            for name in dict.fromkeys(names)
        }
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
