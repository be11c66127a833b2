"""Avro codecs for the wire records: the only code that turns records into bytes and back.

Kafka messages use Avro single-object encoding (``C3 01`` + CRC-64-AVRO fingerprint + body) or,
as an option, the Confluent wire format; logs are Avro container files or JSON lines. Every
failure to read or write surfaces as one `CodecError` raised from fastavro's own exception, so
callers can send bad input to the dead-letter output without knowing fastavro's error types.

Decoded records carry timestamps as epoch milliseconds (ints), the convention of `records.py`,
in every encoding. Schemas are parsed once and cached; codecs keep their writer schemas by
header so decoding is one dict lookup plus fastavro's C reader.
"""

from __future__ import annotations

import abc
import bz2
import copy
import datetime as dt
import functools
import io
import itertools
import json
import lzma
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from typing import IO, Any, Final, TypeAlias, TypeVar

import fastavro
from fastavro.read import SchemaResolutionError
from fastavro.schema import SchemaParseException, parse_schema, to_parsing_canonical_form
from fastavro.schema import fingerprint as _fastavro_fingerprint
from fastavro.validation import ValidationError, validate

from frontierflow.schemas.records import DeadLetter, FetchEvent, FrontierEntry, ScalingDecision

Schema: TypeAlias = dict[str, Any]
"""A schema as `fastavro.parse_schema` returns it (record schemas unless said otherwise)."""
Record: TypeAlias = dict[str, Any]
"""A record as fastavro reads and writes it; `records.py` converts it to a dataclass."""
WireRecord: TypeAlias = FetchEvent | FrontierEntry | ScalingDecision | DeadLetter
RecordKind: TypeAlias = str | type[WireRecord]
"""A record kind: its schema name (``"FetchEvent"``) or its dataclass (`FetchEvent`)."""
PathOrFile: TypeAlias = str | os.PathLike[str] | IO[bytes]

R = TypeVar("R", FetchEvent, FrontierEntry, ScalingDecision, DeadLetter)

SCHEMA_NAMES: Final = ("FetchEvent", "FrontierEntry", "ScalingDecision", "DeadLetter")
RECORD_TYPES: Final[dict[str, type[WireRecord]]] = {
    cls.__name__: cls for cls in (FetchEvent, FrontierEntry, ScalingDecision, DeadLetter)
}
SINGLE_OBJECT_MAGIC: Final = b"\xc3\x01"
CONFLUENT_MAGIC: Final = b"\x00"
CONTAINER_MAGIC: Final = b"Obj\x01"
CONTAINER_CODECS: Final = ("null", "deflate")

_PACKAGE: Final = __name__.rpartition(".")[0]
_MILLIS_LOGICAL_TYPES: Final = frozenset({"timestamp-millis", "local-timestamp-millis"})
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ONE_MS: Final = dt.timedelta(milliseconds=1)
_NO_DEFAULT: Final = object()
_READ_CHUNK: Final = 1 << 20
_MAX_BLOCK_BYTES: Final = 1 << 31
_INT_LIMIT: Final = 1 << 31

# Everything fastavro (C or pure-Python build) raises on bad data or a bad record.
_FASTAVRO_ERRORS: Final = (
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
_DECOMPRESS_ERRORS: Final = (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError)


class CodecError(ValueError):
    """Bytes, text or a record that do not fit the wire contract; the message names the cause."""


LogItem: TypeAlias = tuple[int, Record | CodecError, bytes]
"""One entry of a log: (position, the record or why it could not be read, its raw bytes)."""


def _error(message: str, cause: BaseException) -> CodecError:
    """A CodecError whose message ends with the cause; `__cause__` is set as `raise from` would."""
    detail = " ".join(str(cause).split())  # one line, for logs and dead letters
    name = type(cause).__name__
    error = CodecError(f"{message}: {name}: {detail}" if detail else f"{message}: {name}")
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error


# --- schemas and fingerprints ---------------------------------------------------------------


def _parse_record_schema(schema: Any) -> Schema:
    """fastavro's parse, checked to give the record schema every codec here works on."""
    parsed = parse_schema(schema)
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise CodecError("codecs need a record schema")
    return parsed


def _read_body(buffer: IO[bytes], writer: Schema, reader: Schema | None = None) -> Record:
    """One schemaless record; its fastavro errors propagate for the caller to name."""
    record = fastavro.schemaless_reader(buffer, writer, reader)
    if not isinstance(record, dict):
        raise CodecError(f"expected a record, read a {type(record).__name__}")
    return record


def _file_stem(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _kind_name(kind: RecordKind) -> str:
    name = kind if isinstance(kind, str) else getattr(kind, "__name__", repr(kind))
    if name not in SCHEMA_NAMES:
        raise CodecError(f"unknown record kind {name!r}; expected one of {SCHEMA_NAMES}")
    return name


@functools.cache
def load_schema(name: str) -> Schema:
    """The parsed schema of one record kind, read once from the package's ``.avsc``.

    The result is shared: do not mutate it.
    """
    stem = _file_stem(_kind_name(name))
    text = resources.files(_PACKAGE).joinpath(f"{stem}.avsc").read_text(encoding="utf-8")
    return _parse_record_schema(json.loads(text))


def canonical_form(schema: Schema | str) -> str:
    """The schema's Parsing Canonical Form (Avro spec), the text that is fingerprinted."""
    try:
        form: str = to_parsing_canonical_form(schema)
    except _FASTAVRO_ERRORS as exc:
        raise _error("invalid Avro schema", exc) from exc
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
            raise _error("schema is neither a record kind nor JSON", exc) from exc
    try:
        return _parse_record_schema(schema)  # cheap for an already parsed schema
    except CodecError:
        raise
    except _FASTAVRO_ERRORS as exc:
        raise _error("invalid Avro schema", exc) from exc


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


def _reading_schema(schema: Schema) -> Schema:
    return _parse_record_schema(_strip_millis(schema))


@functools.cache
def _reading_schema_of(name: str) -> Schema:
    return _reading_schema(load_schema(name))


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


def _resolution(writer: Schema, reader: Schema) -> tuple[Schema, Schema | None]:
    """(writer, reader) arguments for fastavro; reader None when no resolution is needed."""
    if schema_fingerprint(writer) == schema_fingerprint(reader):
        return reader, None
    _check_resolvable(writer, reader)
    return _reading_schema(writer), reader


def _base_types(avro_type: Any) -> frozenset[str]:
    if isinstance(avro_type, list):
        return frozenset().union(*(_base_types(branch) for branch in avro_type))
    if isinstance(avro_type, dict):
        return frozenset({avro_type["type"]})
    return frozenset({avro_type})


def _validate(record: Mapping[str, Any], schema: Schema) -> None:
    try:
        validate(record, schema, raise_errors=True)
    except _FASTAVRO_ERRORS as exc:
        raise _error(f"invalid {schema['name']}", exc) from exc


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
        self._read_schema = _reading_schema(schema)
        self._fields = tuple(field["name"] for field in schema["fields"])
        self._required = frozenset(f["name"] for f in schema["fields"] if "default" not in f)
        # fastavro reads and writes any Python int as an Avro int; other readers reject that.
        self._int_fields = tuple(
            f["name"] for f in schema["fields"] if "int" in _base_types(f["type"])
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
            _validate(record, self.schema)
        buffer = io.BytesIO()
        buffer.write(self.header)
        try:
            fastavro.schemaless_writer(buffer, self.schema, record)
        except _FASTAVRO_ERRORS as exc:
            raise _error(f"cannot encode {self.name}", exc) from exc
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
            record = _read_body(buffer, *schemas)
        except _FASTAVRO_ERRORS as exc:
            raise _error(f"bad bytes for {self.name}", exc) from exc
        if buffer.tell() != len(data):
            extra = len(data) - buffer.tell()
            raise CodecError(f"bad bytes for {self.name}: {extra} trailing bytes after the record")
        self._check_ints(record, "bad bytes for")
        return record

    def _add_writer(self, header: bytes, schema: Schema) -> None:
        if header not in self._writers:
            self._writers[header] = _resolution(schema, self._read_schema)

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
        return _codec_for_name(_kind_name(name))

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
        raise _error(f"invalid {kind.__name__}", exc) from exc


def decode_record(kind: type[R], data: bytes) -> R:
    """Decode single-object bytes straight into the dataclass `kind` (e.g. `FetchEvent`)."""
    return record_from_dict(kind, _codec_for_name(_kind_name(kind)).decode(data))


def encode_record(record: WireRecord) -> bytes:
    """Single-object bytes of a record dataclass."""
    return _codec_for_name(_kind_name(type(record))).encode(record.to_avro())


# --- JSON lines -----------------------------------------------------------------------------


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
                raise _error(f"field {self.name!r}: bytes must be latin-1 text", exc) from exc
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
        _Field(field["name"], _base_types(field["type"]), field.get("default", _NO_DEFAULT))
        for field in load_schema(name)["fields"]
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _parse_json(line: str | bytes) -> Any:
    try:
        return json.loads(line, parse_constant=_reject_constant)
    except (ValueError, TypeError, RecursionError) as exc:
        raise _error("not valid JSON", exc) from exc


def json_to_record(line: str | bytes, kind: RecordKind, *, allow_unknown: bool = False) -> Record:
    """The record in one JSON line, validated against the schema of `kind`.

    The JSON is a plain object, not Avro's JSON encoding: unions hold the bare value,
    timestamps are epoch milliseconds, bytes are latin-1 text (one char per byte), and absent
    optional fields take the schema's default. Fields the schema does not know are an error
    (they are usually typos) unless `allow_unknown`.
    """
    name = _kind_name(kind)
    obj = _parse_json(line)
    if not isinstance(obj, dict):
        raise CodecError(f"not a JSON object: a JSON {type(obj).__name__} for {name}")
    fields = _json_fields(name)
    if not allow_unknown and (unknown := obj.keys() - {field.name for field in fields}):
        raise CodecError(f"unknown field(s) {sorted(unknown)} in {name}")
    record = {field.name: field.fill(obj, name) for field in fields}
    _validate(record, load_schema(name))
    return record


def _json_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)  # naive = UTC, as fastavro
        return (aware - _EPOCH) // _ONE_MS
    return value


def record_to_json(record: Mapping[str, Any], kind: RecordKind) -> str:
    """One JSON line (no newline) for `record`, the inverse of `json_to_record`.

    Every schema field is written, in schema order; bytes become latin-1 text, datetimes
    epoch milliseconds. The line is UTF-8 text; NaN and infinities are rejected.
    """
    name = _kind_name(kind)
    _validate(record, load_schema(name))
    values = {field.name: field.to_json(record) for field in _json_fields(name)}
    try:
        return json.dumps(values, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (ValueError, TypeError) as exc:
        raise _error(f"{name} is not representable as JSON", exc) from exc


# --- container files ------------------------------------------------------------------------


@contextmanager
def _open_binary(target: PathOrFile, mode: str) -> Iterator[IO[bytes]]:
    if isinstance(target, str | os.PathLike):
        with open(target, mode) as handle:
            yield handle
    else:
        yield target


def write_container(
    target: PathOrFile,
    kind: RecordKind,
    records: Iterable[Mapping[str, Any]],
    codec: str = "null",
    *,
    append: bool = False,
) -> int:
    """Write `records` to an Avro container file; returns how many were written.

    With `append`, records go after those of an existing file (same schema); a file object
    must then be opened ``"a+b"``.
    """
    name = _kind_name(kind)
    if codec not in CONTAINER_CODECS:
        raise CodecError(f"container codec {codec!r} is not one of {CONTAINER_CODECS}")
    count = 0

    def counted() -> Iterator[Mapping[str, Any]]:
        nonlocal count
        for record in records:
            count += 1
            yield record

    with _open_binary(target, "a+b" if append else "wb") as handle:
        try:
            fastavro.writer(handle, load_schema(name), counted(), codec=codec)
        except _FASTAVRO_ERRORS as exc:
            raise _error(
                f"cannot write {name} container at record {max(count - 1, 0)}", exc
            ) from exc
    return count


_DECOMPRESSORS: Final[dict[str, Callable[[bytes], bytes]]] = {
    "null": bytes,
    "deflate": lambda data: zlib.decompress(data, -15),
    "bzip2": bz2.decompress,
    "xz": lzma.decompress,
}

_HEADER_SCHEMA: Final = _parse_record_schema(
    {
        "type": "record",
        "name": "org.apache.avro.file.Header",
        "fields": [
            {"name": "meta", "type": {"type": "map", "values": "bytes"}},
            {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": 16}},
        ],
    }
)


@dataclass(frozen=True, slots=True)
class _Container:
    """What the header of a container file says about its blocks."""

    writer: Schema
    reader: Schema | None
    decompress: Callable[[bytes], bytes]
    sync: bytes


def _read_exact(handle: IO[bytes], size: int) -> bytes:
    """Exactly `size` bytes, read in chunks so a corrupt size cannot allocate gigabytes."""
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = handle.read(min(remaining, _READ_CHUNK))
        if not chunk:
            raise CodecError(f"truncated container: wanted {size} bytes, got {size - remaining}")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _read_long(handle: IO[bytes], byte: bytes = b"") -> int:
    """One zig-zag varint long, whose first byte may already have been read."""
    value = shift = 0
    while True:
        byte = byte or handle.read(1)
        if not byte:
            raise CodecError("truncated container: file ends inside a block header")
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return (value >> 1) ^ -(value & 1)
        shift += 7
        byte = b""
        if shift > 63:
            raise CodecError("corrupt container: varint longer than 10 bytes")


def _header_schemas(meta: Mapping[str, bytes], kind: str | None) -> tuple[Schema, Schema | None]:
    try:
        writer = _parse_record_schema(json.loads(meta["avro.schema"]))
    except (*_FASTAVRO_ERRORS, RecursionError) as exc:
        raise _error("corrupt container: bad writer schema in the header", exc) from exc
    if kind is None:
        short = str(writer.get("name", "")).rpartition(".")[2]
        if short in SCHEMA_NAMES and load_schema(short)["name"] == writer["name"]:
            kind = short
    if kind is None:
        return _reading_schema(writer), None
    return _resolution(writer, _reading_schema_of(kind))


def _read_container_header(handle: IO[bytes], kind: str | None) -> _Container:
    magic = handle.read(4)
    if magic != CONTAINER_MAGIC:
        raise CodecError(f"not an Avro container file: magic {magic!r}")
    try:
        header = _read_body(handle, _HEADER_SCHEMA)
    except _FASTAVRO_ERRORS as exc:
        raise _error("corrupt container header", exc) from exc
    codec = header["meta"].get("avro.codec", b"null").decode("ascii", "replace")
    if codec not in _DECOMPRESSORS:
        raise CodecError(f"unsupported container codec {codec!r}")
    writer, reader = _header_schemas(header["meta"], kind)
    return _Container(writer, reader, _DECOMPRESSORS[codec], header["sync"])


def _skip(handle: IO[bytes], size: int) -> None:
    if handle.seekable():
        handle.seek(size, os.SEEK_CUR)
    else:
        _read_exact(handle, size)


def _next_block(
    handle: IO[bytes], container: _Container, skippable: int
) -> tuple[int, bytes | None] | None:
    """(record count, compressed data) of the next block, None at the end of the file.

    A block of at most `skippable` records is skipped unread and its data is None.
    """
    first_byte = handle.read(1)
    if not first_byte:
        return None
    count = _read_long(handle, first_byte)
    size = _read_long(handle)
    if count < 0 or not 0 <= size <= _MAX_BLOCK_BYTES:
        raise CodecError(f"corrupt container: block of {count} records in {size} bytes")
    data = None
    if count > skippable:
        data = _read_exact(handle, size)
    else:
        _skip(handle, size)
    if handle.read(16) != container.sync:
        raise CodecError("corrupt container: sync marker mismatch after a block")
    return count, data


def _block_items(
    container: _Container, data: bytes, count: int, first: int, start: int
) -> Iterator[LogItem]:
    """The records of one block; a bad record ends the block with one error item."""
    try:
        plain = container.decompress(data)
    except _DECOMPRESS_ERRORS as exc:
        yield max(first, start), _error("corrupt container block", exc), data
        return
    buffer = io.BytesIO(plain)
    for position in range(first, first + count):
        begin = buffer.tell()
        try:
            item: Record | CodecError = _read_body(buffer, container.writer, container.reader)
        except _FASTAVRO_ERRORS as exc:
            yield max(position, start), _error("bad record in container", exc), plain[begin:]
            return
        if position >= start:
            yield position, item, plain[begin : buffer.tell()]


def container_log(handle: IO[bytes], kind: str | None, start: int) -> Iterator[LogItem]:
    """Items of a container file from record `start`; a broken frame ends it with an error."""
    try:
        container = _read_container_header(handle, kind)
    except CodecError as error:
        yield start, error, b""
        return
    first = 0
    while True:
        try:
            block = _next_block(handle, container, start - first)
        except CodecError as error:
            yield max(first, start), error, b""
            return
        if block is None:
            return
        count, data = block
        if data is not None:
            yield from _block_items(container, data, count, first, start)
        first += count


def read_container(source: PathOrFile, kind: RecordKind | None = None) -> Iterator[Record]:
    """The records of an Avro container file; CodecError at the first corrupt part.

    Records are resolved into the current schema of `kind`, or of the file's own kind when it
    is one of ours; timestamps come back as epoch millis.
    """
    name = None if kind is None else _kind_name(kind)
    with _open_binary(source, "rb") as handle:
        for _, item, _ in container_log(handle, name, 0):
            if isinstance(item, CodecError):
                raise item
            yield item


# --- logs: container or JSON lines, with errors as items -------------------------------------


def jsonl_log(handle: IO[bytes], kind: str, start: int) -> Iterator[LogItem]:
    for position, line in itertools.islice(enumerate(handle), start, None):
        raw = line.rstrip(b"\r\n")
        if not raw.strip():
            continue
        try:
            item: Record | CodecError = json_to_record(raw, kind)
        except CodecError as error:
            item = error
        yield position, item, raw


def iter_log_from(
    path: str | os.PathLike[str], kind: RecordKind, start_position: int
) -> Iterator[LogItem]:
    """Like `read_log`, from record `start_position` on, without decoding what comes before.

    Container blocks before the position are skipped by their record counts (not read or
    decompressed); JSON lines before it are split but not parsed.
    """
    name = _kind_name(kind)
    if start_position < 0:
        raise ValueError(f"start_position must be >= 0, got {start_position}")
    with open(path, "rb") as handle:
        is_container = handle.read(4) == CONTAINER_MAGIC
        handle.seek(0)
        if is_container:
            yield from container_log(handle, name, start_position)
        else:
            yield from jsonl_log(handle, name, start_position)


def read_log(path: str | os.PathLike[str], kind: RecordKind) -> Iterator[LogItem]:
    """(position, record or CodecError, raw bytes) for each record of a log file.

    An Avro container file (it starts with ``Obj\\x01``) or JSON lines. Position is the 0-based
    record index, or the line index for JSON lines (blank lines count but yield nothing). A
    bad line or record becomes an error item and reading goes on; a broken container frame
    (truncated file, wrong sync marker) yields one error item and ends the log.
    """
    return iter_log_from(path, kind, 0)
