"""Compact binary encodings of state values: fixed-layout structs, counters, position tokens.

Formats fix the byte order, so a state directory reads the same on any machine, and wrong
input raises one `StateCodecError`. The engine's counters and the connectors' position tokens
are big-endian, so a counter's bytewise order (RocksDB's key order) is its numeric order.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

_PORTABLE_PREFIXES = ("<", ">", "!")
_U64 = struct.Struct(">Q")
_I32 = struct.Struct(">i")


class StateCodecError(ValueError):
    """Bytes could not be decoded into, or values encoded as, a state value."""


class StructCodec:
    """Encodes a tuple of fields as fixed-size bytes with a `struct` format, and back."""

    def __init__(self, fmt: str) -> None:
        if not fmt.startswith(_PORTABLE_PREFIXES):
            raise StateCodecError(
                f"struct format {fmt!r} must start with '<', '>' or '!' (a fixed byte order)"
            )
        try:
            self._struct = struct.Struct(fmt)
        except struct.error as exc:
            raise StateCodecError(f"invalid struct format {fmt!r}: {exc}") from exc

    @property
    def format(self) -> str:
        """The `struct` format string."""
        return self._struct.format

    @property
    def size(self) -> int:
        """The length in bytes of every encoding."""
        return self._struct.size

    def encode(self, values: tuple[Any, ...]) -> bytes:
        """The bytes of `values`, one per field of the format."""
        try:
            return self._struct.pack(*values)
        except (struct.error, TypeError) as exc:
            raise StateCodecError(f"cannot encode {values!r} as {self.format!r}: {exc}") from exc

    def decode(self, data: bytes) -> tuple[Any, ...]:
        """The fields encoded in `data`, which must be exactly `size` bytes long."""
        if len(data) != self.size:
            raise StateCodecError(
                f"format {self.format!r} needs {self.size} bytes, got {len(data)}"
            )
        return self._struct.unpack(data)


def encode_u64(value: int) -> bytes:
    """8 big-endian bytes of an unsigned counter or position (0 ≤ value < 2**64)."""
    try:
        return _U64.pack(value)
    except struct.error as exc:
        raise StateCodecError(f"{value!r} is not an unsigned 64-bit integer") from exc


def decode_u64(data: bytes) -> int:
    """The unsigned counter or position in 8 big-endian bytes."""
    if len(data) != _U64.size:
        raise StateCodecError(f"a u64 needs {_U64.size} bytes, got {len(data)}")
    value: int = _U64.unpack(data)[0]
    return value


def encode_i32(value: int) -> bytes:
    """4 big-endian bytes of a signed 32-bit value, such as a crawl cycle (−1: never)."""
    try:
        return _I32.pack(value)
    except struct.error as exc:
        raise StateCodecError(f"{value!r} is not a signed 32-bit integer") from exc


def decode_i32(data: bytes) -> int:
    """The signed 32-bit value in 4 big-endian bytes."""
    if len(data) != _I32.size:
        raise StateCodecError(f"an i32 needs {_I32.size} bytes, got {len(data)}")
    value: int = _I32.unpack(data)[0]
    return value


def encode_positions(positions: Sequence[int]) -> bytes:
    """A position token: each position as 8 big-endian bytes, in order (empty: no position).

    The one format of every resume token a source hands the engine and every position a
    sink reports after a flush; what the numbers mean is the connector's business: a log
    file's next record index, a FileSink's file sizes, a Kafka source's (partition, next
    offset) pairs. The engine commits tokens with its state and gives them back on restart.
    """
    return b"".join(encode_u64(position) for position in positions)


def decode_positions(data: bytes, what: str = "position token") -> tuple[int, ...]:
    """The positions in a token made by `encode_positions`; StateCodecError if it is not one.

    `what` names the token in the error message (``"Kafka checkpoint"``, ...).
    """
    if not isinstance(data, bytes):
        raise StateCodecError(f"a {what} must be bytes, not {type(data).__name__}")
    if len(data) % _U64.size:
        raise StateCodecError(
            f"corrupt {what}: {len(data)} bytes is not a whole number of 8-byte positions"
        )
    return tuple(position for (position,) in _U64.iter_unpack(data))
