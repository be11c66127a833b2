"""Stand-ins for the SDK's user state in direct calls of a stateful DoFn's `process` and
timer callbacks: a ReadModifyWriteState cell, a BagState and a watermark timer, each
counting what the step asked of it."""

from __future__ import annotations

from typing import Any

from apache_beam.utils.timestamp import Timestamp


class Cell:
    """A ReadModifyWriteState: read, write, clear, counted."""

    def __init__(self) -> None:
        self.value: Any = None
        self.reads = 0
        self.writes = 0

    def read(self) -> Any:
        self.reads += 1
        return self.value

    def write(self, value: Any) -> None:
        self.writes += 1
        self.value = value

    def clear(self) -> None:
        self.value = None


class Bag:
    """A BagState: read, add, clear, counted."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self.reads = 0
        self.adds = 0
        self.clears = 0

    def read(self) -> list[Any]:
        self.reads += 1
        return list(self.items)

    def add(self, item: Any) -> None:
        self.adds += 1
        self.items.append(item)

    def clear(self) -> None:
        self.clears += 1
        self.items = []


class Timer:
    """A watermark timer: every time it was set, in µs; `at` is where it stands."""

    def __init__(self) -> None:
        self.sets: list[int] = []

    def set(self, at: Timestamp) -> None:
        self.sets.append(int(at.micros))

    @property
    def at(self) -> int | None:
        return self.sets[-1] if self.sets else None
