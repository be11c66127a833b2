"""How records cross Beam stages: as their Avro single-object bytes, through Beam coders.

Each wire record type (FetchEvent, FrontierEntry, DeadLetter, ScalingDecision) has a coder
registered with Beam's registry, so a stage whose output type names the record hands the
next stage a typed record that was encoded once and is decoded once: no pickling, no JSON
inside a pipeline. A frontier change is an entry or a `Removal` (a tag byte, then the
entry's Avro bytes or the URL). The records the pipelines themselves pass between stages
(`UrlUpdate`) are defined here with their coders.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from apache_beam import coders

from frontierflow.schemas.codecs import decode_record, encode_record
from frontierflow.schemas.entry_blocks import single_object_entries
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    Removal,
    ScalingDecision,
)

R = TypeVar("R", FetchEvent, FrontierEntry, DeadLetter, ScalingDecision)


class WireRecordCoder(coders.Coder, Generic[R]):
    """A wire record as its Avro single-object encoding (the bytes Kafka carries)."""

    kind: type[R]

    def encode(self, value: R) -> bytes:
        return encode_record(value)

    def decode(self, encoded: bytes) -> R:
        return decode_record(self.kind, encoded)

    def is_deterministic(self) -> bool:
        return False  # map fields (echo, terms) keep insertion order: never use as a key

    def to_type_hint(self) -> Any:
        return self.kind


class FetchEventCoder(WireRecordCoder[FetchEvent]):
    kind = FetchEvent


class FrontierEntryCoder(WireRecordCoder[FrontierEntry]):
    kind = FrontierEntry


class DeadLetterCoder(WireRecordCoder[DeadLetter]):
    kind = DeadLetter


class ScalingDecisionCoder(WireRecordCoder[ScalingDecision]):
    kind = ScalingDecision


_ENTRY = b"\x01"
_REMOVAL = b"\x00"


class FrontierChangeCoder(coders.Coder):
    """An entry (tag 1 + its Avro bytes) or a removal (tag 0 + the URL in UTF-8)."""

    def encode(self, value: FrontierChange) -> bytes:
        return encode_changes((value,))[0]

    def decode(self, encoded: bytes) -> FrontierChange:
        if encoded[:1] == _REMOVAL:
            return Removal(encoded[1:].decode())
        return decode_record(FrontierEntry, encoded[1:])

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> Any:
        return FrontierChange


def encode_changes(changes: Sequence[FrontierChange]) -> list[bytes]:
    """`FrontierChangeCoder`'s encoding of each change, the entries' Avro bodies written as
    one block (`single_object_entries`: no dict and no schema walk per entry)."""
    entries = iter(single_object_entries([c for c in changes if isinstance(c, FrontierEntry)]))
    return [
        _ENTRY + next(entries) if isinstance(c, FrontierEntry) else _REMOVAL + c.url.encode()
        for c in changes
    ]


for _kind, _coder in (
    (FetchEvent, FetchEventCoder),
    (FrontierEntry, FrontierEntryCoder),
    (DeadLetter, DeadLetterCoder),
    (ScalingDecision, ScalingDecisionCoder),
    (Removal, FrontierChangeCoder),
):
    coders.registry.register_coder(_kind, _coder)


@dataclass(frozen=True, slots=True)
class UrlUpdate:
    """What a per-URL step emits: the URL, its encoded state (None: the key holds none), the
    latest change per change key among the changes it emitted, in order, and (in the
    streaming form) the version of the last message applied: (due µs, position,
    message index)."""

    url: str
    state: bytes | None
    changes: tuple[FrontierChange, ...]
    version: tuple[int, int, int] = (0, 0, 0)


_LENGTH = struct.Struct(">I")
_VERSION = struct.Struct(">qqq")
_CHANGE = FrontierChangeCoder()


def _framed(data: bytes) -> bytes:
    return _LENGTH.pack(len(data)) + data


def _unframe(data: bytes, at: int) -> tuple[bytes, int]:
    (size,) = _LENGTH.unpack_from(data, at)
    at += _LENGTH.size
    return data[at : at + size], at + size


class UrlUpdateCoder(coders.Coder):
    """URL, state (a flag: none, or bytes follow), changes (count + framed change
    encodings), version."""

    def encode(self, value: UrlUpdate) -> bytes:
        parts = [_framed(value.url.encode())]
        parts.append(b"\x00" if value.state is None else b"\x01" + _framed(value.state))
        parts.append(_LENGTH.pack(len(value.changes)))
        parts.extend(_framed(change) for change in encode_changes(value.changes))
        parts.append(_VERSION.pack(*value.version))
        return b"".join(parts)

    def decode(self, encoded: bytes) -> UrlUpdate:
        url, at = _unframe(encoded, 0)
        state: bytes | None = None
        flag = encoded[at : at + 1]
        if flag == b"\x01":
            state, at = _unframe(encoded, at + 1)
        else:
            at += 1
        (count,) = _LENGTH.unpack_from(encoded, at)
        at += _LENGTH.size
        changes = []
        for _ in range(count):
            change, at = _unframe(encoded, at)
            changes.append(_CHANGE.decode(change))
        version = _VERSION.unpack_from(encoded, at)
        return UrlUpdate(url.decode(), state, tuple(changes), version)

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> Any:
        return UrlUpdate


coders.registry.register_coder(UrlUpdate, UrlUpdateCoder)
