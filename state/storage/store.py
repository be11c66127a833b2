"""The interface every state store offers the engine.

A store holds named column families of bytes → bytes. All writes of one committed engine
step go through one `Transaction` and land atomically (one RocksDB write batch): the
per-key strategy state, the input position and the output progress together, so a crash
either keeps the whole step or none of it. Reads inside a transaction see its own writes.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Final, Protocol

Changes = Mapping[str, Mapping[bytes, bytes | None]]
"""What a transaction hands its store on commit: family → key → value (None deletes)."""


class StoreError(RuntimeError):
    """A store was used wrongly (unknown family, finished transaction, closed store)."""


class Transaction(Protocol):
    """Writes buffered until `commit`; reads see the buffered writes first.

    As a context manager it commits on a clean exit and aborts on an exception.
    """

    def get(self, family: str, key: bytes) -> bytes | None: ...

    def get_many(self, family: str, keys: Sequence[bytes]) -> list[bytes | None]: ...

    def put(self, family: str, key: bytes, value: bytes) -> None: ...

    def put_many(self, family: str, items: Iterable[tuple[bytes, bytes | None]]) -> None: ...

    def delete(self, family: str, key: bytes) -> None: ...

    def commit(self) -> None: ...

    def abort(self) -> None: ...

    def __enter__(self) -> Transaction: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class StateStore(Protocol):
    """A durable (RocksDB) or in-memory map of column families."""

    families: tuple[str, ...]

    def get(self, family: str, key: bytes) -> bytes | None: ...

    def get_many(self, family: str, keys: Sequence[bytes]) -> list[bytes | None]: ...

    def items(self, family: str) -> Iterator[tuple[bytes, bytes]]: ...

    def estimate_keys(self, family: str) -> int: ...

    def transaction(self) -> Transaction: ...

    def close(self) -> None: ...

    def __enter__(self) -> StateStore: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


META_FAMILY = "meta"
"""Every store has this family: engine bookkeeping (input position, output progress)."""


def with_meta(families: Iterable[str]) -> tuple[str, ...]:
    """The families a store opens: the given ones plus `meta`, without repeats, in order."""
    out: list[str] = []
    for name in (META_FAMILY, *families):
        if name not in out:
            out.append(name)
    return tuple(out)


def check_family(families: Sequence[str], family: str) -> None:
    """Raise `StoreError` unless `family` is one of the store's families."""
    if family not in families:
        raise StoreError(f"unknown family {family!r}; the store has {list(families)}")


def check_bytes(what: str, data: object) -> None:
    """Raise `TypeError` unless `data` is `bytes` (keys and values are raw bytes)."""
    if not isinstance(data, bytes):
        raise TypeError(f"{what} must be bytes, not {type(data).__name__}")


_KEY_TYPES: Final = frozenset({bytes})
_VALUE_TYPES: Final = frozenset({bytes, type(None)})


class TransactionStatus(enum.Enum):
    """Where a transaction is in its life; only an OPEN one may be used."""

    OPEN = "open"
    COMMITTED = "committed"
    ABORTED = "aborted"
    FAILED = "failed"


class BufferedTransaction(ABC):
    """A `Transaction` that buffers writes in a per-family overlay until `commit`.

    Reads look in the overlay first (a deleted key reads as None) and ask the store only
    for the keys the overlay does not decide, in one `get_many`. On `commit` the whole
    overlay goes to `_write` at once; a backend writes it atomically (RocksDB: one write
    batch). After commit, abort, or a failed commit every method raises `StoreError`.
    Used as a context manager it commits on a clean exit and aborts on an exception.
    """

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._overlay: dict[str, dict[bytes, bytes | None]] = {}
        self._status = TransactionStatus.OPEN

    @property
    def status(self) -> TransactionStatus:
        """OPEN until `commit` or `abort` ends the transaction (FAILED if a commit raised)."""
        return self._status

    def get(self, family: str, key: bytes) -> bytes | None:
        """The value of `key` as this transaction sees it, or None."""
        self._check_usable(family)
        changes = self._overlay.get(family)
        if changes is not None and key in changes:
            return changes[key]
        return self._store.get(family, key)

    def get_many(self, family: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """Values of `keys` in order (None for a miss): the overlay merged over the store."""
        self._check_usable(family)
        changes = self._overlay.get(family, {})
        missing = list(dict.fromkeys(key for key in keys if key not in changes))
        stored = dict(zip(missing, self._store.get_many(family, missing), strict=True))
        return [changes[key] if key in changes else stored[key] for key in keys]

    def put(self, family: str, key: bytes, value: bytes) -> None:
        """Buffer `key` → `value` in `family`."""
        self._check_usable(family)
        check_bytes("key", key)
        check_bytes("value", value)
        self._overlay.setdefault(family, {})[key] = value

    def put_many(self, family: str, items: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Buffer many writes at once (None: delete; a later write of a key wins); one check
        of the types for the whole batch."""
        self._check_usable(family)
        writes = dict(items)
        if not _KEY_TYPES.issuperset(map(type, writes)) or not _VALUE_TYPES.issuperset(
            map(type, writes.values())
        ):
            for key, value in writes.items():
                check_bytes("key", key)
                if value is not None:
                    check_bytes("value", value)
        overlay = self._overlay.get(family)
        if overlay is None:  # the family's first writes: the dict is the overlay
            self._overlay[family] = writes
        else:
            overlay.update(writes)

    def delete(self, family: str, key: bytes) -> None:
        """Buffer the deletion of `key` from `family` (a missing key is fine)."""
        self._check_usable(family)
        check_bytes("key", key)
        self._overlay.setdefault(family, {})[key] = None

    def commit(self) -> None:
        """Write every buffered change at once, then end the transaction."""
        self._check_usable()
        try:
            self._write(self._overlay)
        except BaseException:
            self._status = TransactionStatus.FAILED
            raise
        self._status = TransactionStatus.COMMITTED
        self._overlay = {}

    def abort(self) -> None:
        """Discard every buffered change and end the transaction."""
        self._check_usable()
        self._status = TransactionStatus.ABORTED
        self._overlay = {}

    def __enter__(self) -> BufferedTransaction:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._status is not TransactionStatus.OPEN:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()

    @abstractmethod
    def _write(self, changes: Changes) -> None:
        """Write all of `changes` to the store atomically, or raise and write nothing."""

    def _check_usable(self, family: str | None = None) -> None:
        if self._status is not TransactionStatus.OPEN:
            raise StoreError(f"transaction is {self._status.value}; start a new one")
        if family is not None:
            check_family(self._store.families, family)
