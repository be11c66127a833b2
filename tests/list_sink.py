"""Test helper (not a test file): a sink that keeps every frontier change in a list."""

from __future__ import annotations

from typing import Any

from frontierflow.schemas.records import FrontierChange


class ListSink:
    """Every written change in order; `flush` returns the count as the output position."""

    def __init__(self) -> None:
        self.changes: list[FrontierChange] = []

    def write(self, changes: Any, dead: Any) -> None:
        self.changes += changes

    def flush(self) -> bytes:
        return len(self.changes).to_bytes(8, "big")

    def rewind(self, position: bytes | None) -> None:
        keep = 0 if position is None else int.from_bytes(position, "big")
        del self.changes[keep:]

    def close(self) -> None:
        pass
