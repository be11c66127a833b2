"""What every source and sink of the engine is: input items, positions, and the protocols.

A source yields `InputItem`s — where the item came from, the decoded FetchEvent (or a
`Failed` record for the dead-letter output) and the raw bytes — and resumes from an opaque
token the engine commits with its state. A sink takes frontier changes and dead letters,
flushes them durably and reports an opaque position, and can be rewound to a committed
position after a crash. Tokens and positions are position tokens
(`frontierflow.state.storage.codec.encode_positions`: unsigned 64-bit big-endian numbers
whose meaning is the connector's), so every one in a state directory has one byte order and
one error type.
Connectors build on these types; engines drive them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from frontierflow.schemas.records import DeadLetter, FetchEvent, FrontierChange, ScalingDecision


@dataclass(frozen=True, slots=True)
class Failed:
    """An input item the source could not decode; it becomes a dead letter."""

    error_class: str
    message: str
    raw: bytes

    def dead_letter(
        self, source: str, partition: int | None, offset: int, raw: bytes
    ) -> DeadLetter:
        """This failure as the dead letter of the record at (`partition`, `offset`) of
        `source`, carrying the record's `raw` bytes (`at` 0: the sink stamps it)."""
        return DeadLetter(source, partition, offset, self.error_class, self.message, raw, 0)


class Position(NamedTuple):
    """Where an input item came from: a Kafka partition and offset, or (None, record index)
    in a file."""

    partition: int | None
    offset: int


InputItem = tuple[Position, FetchEvent | Failed, bytes]
"""(where in the input, the decoded event or the failure, the raw bytes)."""


class Source(Protocol):
    """Reads input items from a resume token on: `poll` returns up to `max_records` items
    and the token that resumes after them (the engine commits it with the step)."""

    def poll(self, max_records: int, timeout_ms: int) -> tuple[list[InputItem], bytes]: ...

    def close(self) -> None: ...


class Sink(ABC):
    """Where frontier changes and dead letters go. Positions are position tokens, opaque
    to the engine."""

    @abstractmethod
    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None:
        """Queue `changes` (entries and removals) and dead letters for the next flush."""

    @abstractmethod
    def flush(self) -> bytes:
        """Make everything written durable; return the position after it."""

    @abstractmethod
    def rewind(self, position: bytes | None) -> None:
        """Forget whatever was written after `position` (None: the start)."""


class DecisionSink(Sink):
    """A sink that also takes the speed controller's ScalingDecisions (fetcher-control)."""

    @abstractmethod
    def write_decisions(self, decisions: Sequence[ScalingDecision]) -> None:
        """Queue the decisions for the next flush."""
