"""Avro schemas and message codecs: the only code that turns wire records into bytes and back.

Schemas are parsed once and cached; Kafka messages use Avro single-object encoding (`AvroCodec`:
``C3 01`` + CRC-64-AVRO fingerprint + body) or the Confluent wire format (`ConfluentCodec`).
Every failure surfaces as one `CodecError` raised from fastavro's own exception, and decoded
records carry timestamps as epoch milliseconds (ints), the convention of `records.py`.
"""

from __future__ import annotations

import abc
import functools
import io
import json
import os
import re
import struct
from collections.abc import Mapping
from importlib import resources
from typing import IO, Any, Final, TypeAlias, TypeVar

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.schema import SchemaParseException, parse_schema, to_parsing_canonical_form
from fastavro.schema import fingerprint as _fastavro_fingerprint
from fastavro.validation import ValidationError, validate

from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierEntry,
    ScalingDecision,
    SeedRequest,
)

Schema: TypeAlias = dict[str, Any]
"""A schema as `fastavro.parse_schema` returns it (record schemas unless said otherwise)."""
Record: TypeAlias = dict[str, Any]
"""A record as fastavro reads and writes it; `records.py` converts it to a dataclass."""
WireRecord: TypeAlias = FetchEvent | FrontierEntry | ScalingDecision | DeadLetter | SeedRequest
RecordKind: TypeAlias = str | type[WireRecord]
"""A record kind: its schema name (``"FetchEvent"``) or its dataclass (`FetchEvent`)."""
PathOrFile: TypeAlias = str | os.PathLike[str] | IO[bytes]

R = TypeVar("R", FetchEvent, FrontierEntry, ScalingDecision, DeadLetter, SeedRequest)

SCHEMA_NAMES: Final = (
    "FetchEvent",
    "FrontierEntry",
    "ScalingDecision",
    "DeadLetter",
    "SeedRequest",
)
RECORD_TYPES: Final[dict[str, type[WireRecord]]] = {
    cls.__name__: cls
    for cls in (FetchEvent, FrontierEntry, ScalingDecision, DeadLetter, SeedRequest)
}
SINGLE_OBJECT_MAGIC: Final = b"\xc3\x01"
CONFLUENT_MAGIC: Final = b"\x00"

_PACKAGE: Final = __name__.rpartition(".")[0]
_MILLIS_LOGICAL_TYPES: Final = frozenset({"timestamp-millis", "local-timestamp-millis"})
_INT_LIMIT: Final = 1 << 31

FASTAVRO_ERRORS: Final = (
    ValueError,
    TypeError,
    EOFError,
    IndexError,
    KeyError,
    AttributeError,
    OverflowError,
    MemoryError,
    struct.error,
    SchemaResolutionError,
    SchemaParseException,
    ValidationError,
)
"""Everything fastavro (C or pure-Python build) raises on bad data or a bad record."""


class CodecError(ValueError):
    """Bytes, text or a record that do not fit the wire contract; the message names the cause."""


def codec_error(message: str, cause: BaseException) -> CodecError:
    """A CodecError whose message ends with the cause; `__cause__` is set as `raise from` would."""
    detail = " ".join(str(cause).split())  # one line, for logs and dead letters
    name = type(cause).__name__
    error = CodecError(f"{message}: {name}: {detail}" if detail else f"{message}: {name}")
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error


# --- schemas and fingerprints ---------------------------------------------------------------


def parse_record_schema(schema: Any) -> Schema:
    """fastavro's parse, checked to give the record schema every codec here works on."""
    parsed = parse_schema(schema)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise CodecError("codecs need a record schema")
    return parsed


def read_body(buffer: IO[bytes], writer: Schema, reader: Schema | None = None) -> Record:
    """One schemaless record; its fastavro errors propagate for the caller to name."""
    record = fastavro.schemaless_reader(buffer, writer, reader)
    if not isinstance(record, dict):
        raise CodecError(f"expected a record, read a {type(record).__name__}")
    return record


def _file_stem(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def kind_name(kind: RecordKind) -> str:
    """The schema name of a record kind; CodecError unless it is one of `SCHEMA_NAMES`."""
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", repr(kind))
    if name not in SCHEMA_NAMES:
        raise CodecError(f"unknown record kind {name!r}; expected one of {SCHEMA_NAMES}")
    return name


@functools.cache
def load_schema(name: str) -> Schema:
    """The parsed schema of one record kind, read once from the package's ``.avsc``.

    The result is shared: do not mutate it.
    """
    stem = _file_stem(kind_name(name))
    text = resources.files(_PACKAGE).joinpath(f"{stem}.avsc").read_text(encoding="utf-8")
    return parse_record_schema(json.loads(text))


def canonical_form(schema: Schema | str) -> str:
    """The schema's Parsing Canonical Form (Avro spec), the text that is fingerprinted."""
    try:
        form: str = to_parsing_canonical_form(schema)
    except FASTAVRO_ERRORS as exc:
        raise codec_error("invalid Avro schema", exc) from exc
    return form


def schema_fingerprint(schema: Schema | str) -> bytes:
    """The 8-byte little-endian CRC-64-AVRO (Rabin) fingerprint of the canonical form."""
    return bytes.fromhex(_fastavro_fingerprint(canonical_form(schema), "CRC-64-AVRO"))


def _parse(schema: Schema | str) -> Schema:
    """A parsed record schema from a kind name, JSON text, a raw dict or a parsed dict."""
    if isinstance(schema, str):
        if schema in SCHEMA_NAMES:
            return load_schema(schema)
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise codec_error("schema is neither a record kind nor JSON", exc) from exc
    try:
        return parse_record_schema(schema)  # cheap for an already parsed schema
    except CodecError:
        raise
    except FASTAVRO_ERRORS as exc:
        raise codec_error("invalid Avro schema", exc) from exc


def _strip_millis(node: Any) -> Any:
    """A copy of a schema whose millisecond timestamps read as plain longs (epoch millis)."""
    if isinstance(node, list):
        return [_strip_millis(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        key: value if key == "default" else _strip_millis(value)
        for key, value in node.items()
        if not key.startswith("__")
        and not (key == "logicalType" and value in _MILLIS_LOGICAL_TYPES)
    }


def reading_schema(schema: Schema) -> Schema:
    """`schema` parsed so that millisecond timestamps read as epoch-millisecond ints."""
    return parse_record_schema(_strip_millis(schema))


@functools.cache
def reading_schema_of(name: str) -> Schema:
    """The cached `reading_schema` of one record kind."""
    return reading_schema(load_schema(name))


def _check_resolvable(writer: Schema, reader: Schema) -> None:
    """Reject, once and up front, a writer schema whose records the reader cannot resolve."""
    names = {reader["name"], *reader.get("aliases", ())}
    if writer.get("type") != "record" or writer.get("name") not in names:
        raise CodecError(f"writer schema {writer.get('name')!r} is not {reader['name']!r}")
    written = {field["name"] for field in writer["fields"]}
    for field in reader["fields"]:
        if "default" not in field and written.isdisjoint(
            {field["name"], *field.get("aliases", ())}
        ):
            raise CodecError(
                f"writer schema lacks field {field['name']!r}, which has no default in the reader"
            )


def resolve_schemas(writer: Schema, reader: Schema) -> tuple[Schema, Schema | None]:
    """(writer, reader) arguments for fastavro; reader None when no resolution is needed."""
    if schema_fingerprint(writer) == schema_fingerprint(reader):
        return reader, None
    _check_resolvable(writer, reader)
    return reading_schema(writer), reader


def base_types(avro_type: Any) -> frozenset[str]:
    """The type names a field may hold: each branch of a union, a named type's own type."""
    if isinstance(avro_type, list):
        return frozenset().union(*(base_types(branch) for branch in avro_type))
    if isinstance(avro_type, dict):
        return frozenset({avro_type["type"]})
    return frozenset({avro_type})


def validate_record(record: Mapping[str, Any], schema: Schema) -> None:
    """fastavro's full validation of `record` against `schema`; CodecError if it fails."""
    try:
        validate(record, schema, raise_errors=True)
    except FASTAVRO_ERRORS as exc:
        raise codec_error(f"invalid {schema['name']}", exc) from exc


# --- Kafka message codecs ---------------------------------------------------------------------


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise CodecError(f"expected bytes, got {type(data).__name__}")


class _FramedCodec(abc.ABC):
    """A header that names the writer schema, then the schemaless Avro body.

    Writer schemas are kept by their exact header bytes, so decoding looks the writer up with one
    dict access and never parses a schema.
    """

    def __init__(self, schema: Schema, header: bytes) -> None:
        self.schema = schema
        self.name: str = schema["name"]
        self.header = header
        self._read_schema = reading_schema(schema)
        self._fields = tuple(field["name"] for field in schema["fields"])
        self._required = frozenset(f["name"] for f in schema["fields"] if "default" not in f)
        # fastavro reads and writes any Python int as an Avro int; other readers reject that.
        self._int_fields = tuple(
            f["name"] for f in schema["fields"] if "int" in base_types(f["type"])
        )
        self._writers: dict[bytes, tuple[Schema, Schema | None]] = {
            header: (self._read_schema, None)
        }

    def encode(self, record: Mapping[str, Any], *, validate: bool = False) -> bytes:
        """Header + body of `record` (timestamps as epoch millis or aware datetimes).

        fastavro's writer checks types but truncates a float given for a long and takes any
        value for a boolean; `validate` runs the full (slower) check, for untrusted records.
        """
        self._check_required(record)
        self._check_ints(record, "cannot encode")
        if validate:
            validate_record(record, self.schema)
        buffer = io.BytesIO()
        buffer.write(self.header)
        try:
            fastavro.schemaless_writer(buffer, self.schema, record)
        except FASTAVRO_ERRORS as exc:
            raise codec_error(f"cannot encode {self.name}", exc) from exc
        return buffer.getvalue()

    def decode(self, data: bytes) -> Record:
        """The record in `data`, resolved into this codec's schema; CodecError if unreadable."""
        if type(data) is not bytes:
            data = _as_bytes(data)
        size = len(self.header)
        schemas = self._writers.get(data[:size])
        if schemas is None:
            raise self._unknown_header(data)
        buffer = io.BytesIO(data)
        buffer.seek(size)
        try:
            record = read_body(buffer, *schemas)
        except FASTAVRO_ERRORS as exc:
            raise codec_error(f"bad bytes for {self.name}", exc) from exc
        if buffer.tell() != len(data):
            extra = len(data) - buffer.tell()
            raise CodecError(f"bad bytes for {self.name}: {extra} trailing bytes after the record")
        self._check_ints(record, "bad bytes for")
        return record

    def _add_writer(self, header: bytes, schema: Schema) -> None:
        if header not in self._writers:
            self._writers[header] = resolve_schemas(schema, self._read_schema)

    def _check_required(self, record: Mapping[str, Any]) -> None:
        if not isinstance(record, Mapping):
            raise CodecError(
                f"cannot encode {self.name}: expected a dict, got {type(record).__name__}"
            )
        if not self._required <= record.keys():
            missing = next(name for name in self._fields if name in self._required - record.keys())
            raise CodecError(f"cannot encode {self.name}: missing field {missing!r}")

    def _check_ints(self, record: Mapping[str, Any], problem: str) -> None:
        for name in self._int_fields:
            value = record.get(name)
            if isinstance(value, int) and not -_INT_LIMIT <= value < _INT_LIMIT:
                raise CodecError(f"{problem} {self.name}: {name}={value} is out of the int range")

    @abc.abstractmethod
    def _unknown_header(self, data: bytes) -> CodecError:
        """Why `data` has no known header, as an error to raise."""


class AvroCodec(_FramedCodec):
    """Avro single-object encoding: ``C3 01``, the writer's 8-byte fingerprint, the body.

    A codec reads records written with its own schema and with every older (or newer) version
    registered through `register_writer`, resolving them into its own schema.
    """

    def __init__(self, schema: Schema | str) -> None:
        parsed = _parse(schema)
        self.fingerprint = schema_fingerprint(parsed)
        super().__init__(parsed, SINGLE_OBJECT_MAGIC + self.fingerprint)

    @classmethod
    def for_name(cls, name: str) -> AvroCodec:
        """The shared codec of a record kind; writers registered on it are seen by all users."""
        return _codec_for_name(kind_name(name))

    def register_writer(self, schema: Schema | str) -> bytes:
        """Accept records written with `schema`; returns its fingerprint."""
        parsed = _parse(schema)
        fingerprint = schema_fingerprint(parsed)
        self._add_writer(SINGLE_OBJECT_MAGIC + fingerprint, parsed)
        return fingerprint

    def _unknown_header(self, data: bytes) -> CodecError:
        if not data:
            return CodecError(f"bad bytes for {self.name}: empty message")
        if data[:2] != SINGLE_OBJECT_MAGIC:
            return CodecError(
                f"wrong magic {data[:2].hex()!r} for {self.name}: not Avro single-object encoding"
            )
        if len(data) < len(self.header):
            return CodecError(f"bad bytes for {self.name}: truncated single-object header")
        fingerprint = int.from_bytes(data[2:10], "little")
        return CodecError(
            f"unknown schema fingerprint 0x{fingerprint:016x} for {self.name} "
            "(register the writer schema with register_writer)"
        )


@functools.cache
def _codec_for_name(name: str) -> AvroCodec:
    return AvroCodec(load_schema(name))


def _confluent_header(schema_id: int) -> bytes:
    if not 0 <= schema_id < 1 << 31:
        raise CodecError(f"Confluent schema id {schema_id} is out of range")
    return CONFLUENT_MAGIC + schema_id.to_bytes(4, "big")


class ConfluentCodec(_FramedCodec):
    """Confluent wire format: magic byte 0, 4-byte big-endian schema-registry id, the body."""

    def __init__(self, schema_id: int, schema: Schema | str) -> None:
        self.schema_id = schema_id
        super().__init__(_parse(schema), _confluent_header(schema_id))

    def register_writer(self, schema_id: int, schema: Schema | str) -> None:
        """Accept records written with registry id `schema_id`, whose schema is `schema`."""
        self._add_writer(_confluent_header(schema_id), _parse(schema))

    def _unknown_header(self, data: bytes) -> CodecError:
        if not data:
            return CodecError(f"bad bytes for {self.name}: empty message")
        if data[:1] != CONFLUENT_MAGIC:
            return CodecError(
                f"wrong magic {data[:1].hex()!r} for {self.name}: not Confluent wire format"
            )
        if len(data) < len(self.header):
            return CodecError(f"bad bytes for {self.name}: truncated Confluent header")
        return CodecError(f"unknown schema id {int.from_bytes(data[1:5], 'big')} for {self.name}")


def record_from_dict(kind: type[R], record: Mapping[str, Any]) -> R:
    """The dataclass of `kind` built from a decoded record; CodecError if a field is missing."""
    try:
        return kind.from_avro(record if isinstance(record, dict) else dict(record))
    except KeyError as exc:
        raise CodecError(f"missing field {exc.args[0]!r} in {kind.__name__}") from exc
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise codec_error(f"invalid {kind.__name__}", exc) from exc


def decode_record(kind: type[R], data: bytes) -> R:
    """Decode single-object bytes straight into the dataclass `kind` (e.g. `FetchEvent`)."""
    return record_from_dict(kind, _codec_for_name(kind_name(kind)).decode(data))


def encode_record(record: WireRecord) -> bytes:
    """Single-object bytes of a record dataclass."""
    return _codec_for_name(kind_name(type(record))).encode(record.to_avro())
