"""State written in bulk: sorted (key, value) pairs as SST files, to be ingested into a store.

Keys and values are the store's own bytes (the encodings of `state/`), so a store filled
this way (`RocksDBStore.ingest`) reads as one the engine filled, at a fraction of the
cost: no write-ahead log, no memtable, no compaction — the files land on the lowest level
whole. What a benchmark uses to hold 100M URLs in state before it times the engine's own
work on them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rocksdict import SstFileWriter

from frontierflow.state.storage.rocksdb_options import RocksDBOptions
from frontierflow.state.storage.store import StoreError

SST_FILE_BYTES = 64 * 1024 * 1024
"""Size at which a `SortedSstWriter` starts a new file."""
_SIZE_CHECK_EVERY = 4096
"""Keys written between two looks at the file's size."""


class SortedSstWriter:
    """Writes (key, value) pairs, in strictly increasing bytewise key order over all calls,
    as SST files of about `file_bytes` each in `directory`, in the table layout of
    `options` (`RocksDBOptions.sst_options`). Keys out of order raise `StoreError`."""

    def __init__(
        self, directory: Path, options: RocksDBOptions, *, file_bytes: int = SST_FILE_BYTES
    ) -> None:
        if file_bytes < 1:
            raise ValueError(f"file_bytes must be >= 1, got {file_bytes}")
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.file_bytes = file_bytes
        self.written = 0
        """Keys written so far."""
        self._options = options.sst_options()
        self._paths: list[Path] = []
        self._writer: SstFileWriter | None = None
        self._in_file = 0

    def put_many(self, items: Iterable[tuple[bytes, bytes]]) -> None:
        """Append `items`, each key greater than every key before it."""
        for key, value in items:
            writer = self._writer if self._writer is not None else self._next_file()
            try:
                writer[key] = value
            except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
                raise StoreError(f"cannot write {key[:100]!r} to {self._paths[-1]}: {exc}") from exc
            self.written += 1
            self._in_file += 1
            if self._in_file % _SIZE_CHECK_EVERY == 0 and writer.file_size() >= self.file_bytes:
                self._finish_file()

    def finish(self) -> list[Path]:
        """Close the last file; the files written, in key order (none if no key was)."""
        if self._writer is not None:
            self._finish_file()
        return list(self._paths)

    def _next_file(self) -> SstFileWriter:
        path = self.directory / f"{len(self._paths):05d}.sst"
        writer = SstFileWriter(self._options)
        try:
            writer.open(str(path))
        except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
            raise StoreError(f"cannot open SST file {path}: {exc}") from exc
        self._paths.append(path)
        self._writer, self._in_file = writer, 0
        return writer

    def _finish_file(self) -> None:
        assert self._writer is not None
        try:
            self._writer.finish()
        except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
            raise StoreError(f"cannot finish SST file {self._paths[-1]}: {exc}") from exc
        self._writer = None
