"""JSON lines for wire records: hand-written logs, debugging output, the replay's files.

A line is a plain JSON object, not Avro's JSON encoding: unions hold the bare value,
timestamps are epoch milliseconds and bytes are latin-1 text. Lines are validated against
the same Avro schemas as binary messages, and every failure is a `CodecError`.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from frontierflow.schemas.codecs import (
    CodecError,
    Record,
    RecordKind,
    base_types,
    codec_error,
    kind_name,
    load_schema,
    validate_record,
)

_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ONE_MS: Final = dt.timedelta(milliseconds=1)
_NO_DEFAULT: Final = object()


@dataclass(frozen=True, slots=True)
class _Field:
    """What the JSON mapping needs to know about one top-level field."""

    name: str
    types: frozenset[str]
    default: Any

    def from_json(self, value: Any) -> Any:
        if isinstance(value, bool) and "boolean" not in self.types:
            raise CodecError(f"field {self.name!r}: a boolean is not {sorted(self.types)}")
        if isinstance(value, str) and "bytes" in self.types and "string" not in self.types:
            try:
                return value.encode("latin-1")
            except UnicodeEncodeError as exc:
                raise codec_error(f"field {self.name!r}: bytes must be latin-1 text", exc) from exc
        if type(value) is int and self.types & {"double", "float"} and "long" not in self.types:
            return float(value)
        return value

    def fill(self, record: Mapping[str, Any], kind: str) -> Any:
        if self.name in record:
            return self.from_json(record[self.name])
        if self.default is _NO_DEFAULT:
            raise CodecError(f"missing field {self.name!r} in {kind}")
        return copy.deepcopy(self.default)  # never share a mutable default between records

    def to_json(self, record: Mapping[str, Any]) -> Any:
        default = None if self.default is _NO_DEFAULT else self.default
        return _json_value(record.get(self.name, default))


@functools.cache
def _json_fields(name: str) -> tuple[_Field, ...]:
    return tuple(
        _Field(field["name"], base_types(field["type"]), field.get("default", _NO_DEFAULT))
        for field in load_schema(name)["fields"]
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(line: str | bytes) -> Any:
    try:
        return json.loads(line, parse_constant=_reject_constant)
    except (ValueError, TypeError, RecursionError) as exc:
        raise codec_error("not valid JSON", exc) from exc


def json_to_record(line: str | bytes, kind: RecordKind, *, allow_unknown: bool = False) -> Record:
    """The record in one JSON line, validated against the schema of `kind`.

    The JSON is a plain object, not Avro's JSON encoding: unions hold the bare value,
    timestamps are epoch milliseconds, bytes are latin-1 text (one char per byte), and absent
    optional fields take the schema's default. Fields the schema does not know are an error
    (they are usually typos) unless `allow_unknown`.
    """
    name = kind_name(kind)
    obj = _parse_json(line)
    if not isinstance(obj, dict):
        raise CodecError(f"not a JSON object: a JSON {type(obj).__name__} for {name}")
    fields = _json_fields(name)
    if not allow_unknown and (unknown := obj.keys() - {field.name for field in fields}):
        raise CodecError(f"unknown field(s) {sorted(unknown)} in {name}")
    record = {field.name: field.fill(obj, name) for field in fields}
    validate_record(record, load_schema(name))
    return record


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)  # naive = UTC, as fastavro
        return (aware - _EPOCH) // _ONE_MS
    return value


def record_to_json(record: Mapping[str, Any], kind: RecordKind, *, validate: bool = True) -> str:
    """One JSON line (no newline) for `record`, the inverse of `json_to_record`.

    Every schema field is written, in schema order; bytes become latin-1 text, datetimes
    epoch milliseconds. The line is UTF-8 text; NaN and infinities are rejected.
    `validate=False` skips the schema check, for records that came from a typed record's
    `to_avro` (their types are the schema's by construction).
    """
    name = kind_name(kind)
    if validate:
        validate_record(record, load_schema(name))
    values = {field.name: field.to_json(record) for field in _json_fields(name)}
    try:
        return json.dumps(values, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError) as exc:
        raise codec_error(f"{name} is not representable as JSON", exc) from exc
