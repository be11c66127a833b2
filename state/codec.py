"""Compact binary encodings of state values: fixed-layout structs and 64-bit counters.

Formats must fix the byte order, so a state directory reads the same on any machine;
wrong input raises one `StateCodecError`. Counters are big-endian, so their bytewise
order (RocksDB's key order) is their numeric order.
"""

from __future__ import annotations

import struct
from typing import Any

_PORTABLE_PREFIXES = ("<", ">", "!")
_U64 = struct.Struct(">Q")


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
