"""An in-memory state store with the same interface and semantics as the RocksDB one.

For tests, simulations and replays that need no durability: one dict per family, the same
buffered transactions, the same guards, and iteration in bytewise key order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType

from frontierflow.state.storage.codec import encode_u64
from frontierflow.state.storage.format import STORE_FORMAT, STORE_FORMAT_KEY
from frontierflow.state.storage.store import (
    META_FAMILY,
    BufferedTransaction,
    Changes,
    StoreError,
    check_family,
    with_meta,
)


class InMemoryTransaction(BufferedTransaction):
    """A transaction on an `InMemoryStore`; `commit` applies all changes at once."""

    def __init__(self, store: InMemoryStore) -> None:
        super().__init__(store)
        self._memory = store

    def _write(self, changes: Changes) -> None:
        self._memory._apply(changes)


class InMemoryStore:
    """A `StateStore` in a dict per family; nothing survives `close`."""

    def __init__(self, families: Iterable[str]) -> None:
        self.families: tuple[str, ...] = with_meta(families)
        self._data: dict[str, dict[bytes, bytes]] = {name: {} for name in self.families}
        self._data[META_FAMILY][STORE_FORMAT_KEY] = encode_u64(STORE_FORMAT)  # as RocksDB's
        self._closed = False

    def get(self, family: str, key: bytes) -> bytes | None:
        """The committed value of `key` in `family`, or None."""
        return self._family(family).get(key)

    def get_many(self, family: str, keys: Sequence[bytes]) -> list[bytes | None]:
        """Committed values of `keys` in order (None for a miss)."""
        data = self._family(family)
        return [data.get(key) for key in keys]

    def items(self, family: str) -> Iterator[tuple[bytes, bytes]]:
        """Every committed (key, value) of `family` in bytewise key order (a snapshot)."""
        return iter(sorted(self._family(family).items()))

    def estimate_keys(self, family: str) -> int:
        """The number of keys in `family` (exact here)."""
        return len(self._family(family))

    def transaction(self) -> InMemoryTransaction:
        """A new transaction whose `commit` applies all its changes together."""
        self._check_open()
        return InMemoryTransaction(self)

    def close(self) -> None:
        """Drop the data; closing twice is harmless."""
        self._closed = True
        self._data = {}

    def __enter__(self) -> InMemoryStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _apply(self, changes: Changes) -> None:
        """Apply all `changes`; every family is checked before anything is written."""
        targets = {family: self._family(family) for family in changes}
        for family, family_changes in changes.items():
            data = targets[family]
            for key, value in family_changes.items():
                if value is None:
                    data.pop(key, None)
                else:
                    data[key] = value

    def _family(self, family: str) -> dict[bytes, bytes]:
        self._check_open()
        check_family(self.families, family)
        return self._data[family]

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("in-memory store is closed")
