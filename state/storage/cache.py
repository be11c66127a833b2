"""A bounded cache of committed state values that lasts across an engine's steps.

RocksDB stays the truth: the cache holds values the store holds (committed by a step, or
read from the store) and the writes of steps whose transaction is still open (an engine's
commit interval), which that transaction holds too; the engine clears the cache when such a
transaction is dropped or fails to commit, so nothing is left in it that the store does
not hold. The values are whatever the engine keeps: decoded states when the strategy never
changes a state in place (`Strategy.immutable_states`), else their encoded bytes.
Eviction is generational (two dicts: a hit in the old generation moves the key
to the young one; when the young one is full the old one is dropped whole), an
approximate LRU at O(1) per operation with no per-hit reordering.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from itertools import compress, repeat
from operator import is_
from typing import Generic, TypeVar, cast

V = TypeVar("V")


class HotStates(Generic[V]):
    """key → committed value for at most `capacity` keys (0: no caching).

    `complete`: the cache holds every key of its family, so a key it lacks is in the store
    neither and needs no read. True when it starts on an empty family (the caller says so)
    and until it first drops a generation; a fresh crawl's first `capacity / 2` or more
    distinct keys never touch the store's read path (on `frontierflow bench` every miss
    is a URL never seen before, each a RocksDB lookup that finds nothing).
    """

    def __init__(self, capacity: int, complete: bool = False) -> None:
        if capacity < 0:
            raise ValueError(f"cache capacity must be >= 0, got {capacity}")
        self.capacity = capacity
        self._generation = max(1, capacity // 2)
        self._young: dict[str, V] = {}
        self._old: dict[str, V] = {}
        self.hits = 0
        self.misses = 0
        self.complete = complete and capacity > 0

    def __len__(self) -> int:
        return len(self._young) + len(self._old)

    def get(self, key: str) -> V | None:
        """The cached value of `key`, or None when the store must be asked."""
        value = self._young.get(key)
        if value is not None:
            self.hits += 1
            return value
        value = self._old.pop(key, None)
        if value is None:
            self.misses += 1
            return None
        self.hits += 1
        self._keep(key, value)
        return value

    def get_many(self, keys: Iterable[str]) -> tuple[dict[str, V], list[str]]:
        """`get` for many keys: (key → value for the cached ones, the keys not cached)."""
        young, old = self._young, self._old
        keys = keys if isinstance(keys, list) else list(keys)
        values = list(map(young.get, keys))  # the young generation's answers, in C passes
        found: dict[str, V | None] = dict(zip(keys, values, strict=True))
        missing: list[str] = []
        if None in values:  # the rest: the old generation, then the store
            for key in compress(keys, map(is_, values, repeat(None))):
                if found[key] is not None:
                    continue  # a repeated key, found at its first occurrence
                value = old.pop(key, None)
                if value is None:
                    missing.append(key)
                else:
                    young[key] = found[key] = value
            for key in missing:
                found.pop(key, None)
        self.hits += len(found)
        self.misses += len(missing)
        if len(young) > self._generation:
            self._new_generation()
        return cast("dict[str, V]", found), missing  # no None left

    def put_many(
        self, values: Mapping[str, V] | Iterable[tuple[str, V]], deleted: Iterable[str] = ()
    ) -> None:
        """Record committed values and forget the keys whose value was deleted. The young
        generation may pass its size by one step's writes before it becomes the old one."""
        if not self.capacity:
            return
        young, old = self._young, self._old
        young.update(values)  # shadows any older value in the old generation
        for key in deleted:
            young.pop(key, None)
            old.pop(key, None)
        if len(young) > self._generation:
            self._new_generation()

    def clear(self) -> None:
        self._young.clear()
        self._old.clear()
        self.complete = False

    def _new_generation(self) -> None:
        """The young generation becomes the old one; the old one's keys are dropped."""
        if self._old:
            self.complete = False
        self._old = self._young
        self._young = {}

    def _keep(self, key: str, value: V) -> None:
        young = self._young
        young[key] = value
        if len(young) > self._generation:
            self._new_generation()
