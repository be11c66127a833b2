"""How records cross Beam stages: as their Avro single-object bytes, through Beam coders.

Each wire record type (FetchEvent, FrontierEntry, DeadLetter, ScalingDecision) has a coder
registered with Beam's registry, so a stage whose output type names the record hands the
next stage a typed record that was encoded once and is decoded once: no pickling, no JSON
inside a pipeline. A frontier change is an entry or a `Removal` (a tag byte, then the
entry's Avro bytes or the URL).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from apache_beam import coders

from frontierflow.schemas.codecs import decode_record, encode_record
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
        if isinstance(value, Removal):
            return _REMOVAL + value.url.encode()
        return _ENTRY + encode_record(value)

    def decode(self, encoded: bytes) -> FrontierChange:
        if encoded[:1] == _REMOVAL:
            return Removal(encoded[1:].decode())
        return decode_record(FrontierEntry, encoded[1:])

    def is_deterministic(self) -> bool:
        return False

    def to_type_hint(self) -> Any:
        return FrontierChange


for _kind, _coder in (
    (FetchEvent, FetchEventCoder),
    (FrontierEntry, FrontierEntryCoder),
    (DeadLetter, DeadLetterCoder),
    (ScalingDecision, ScalingDecisionCoder),
    (Removal, FrontierChangeCoder),
):
    coders.registry.register_coder(_kind, _coder)
