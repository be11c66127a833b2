"""Avro container files and record logs: how recorded crawls and frontier files are read.

`write_container` and `read_container` handle Avro object container files; `read_log` and
`iter_log_from` read a log that is either a container or JSON lines, from any record position,
and turn unreadable records into error items instead of stopping, for the dead-letter output;
`container_log_part` reads one of several parts of a container, for readers side by side.
"""

from __future__ import annotations

import bz2
import io
import itertools
import json
import lzma
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Final, Literal, TypeAlias

import fastavro
from fastavro.write import Writer

from frontierflow.schemas.codecs import (
    FASTAVRO_ERRORS,
    SCHEMA_NAMES,
    CodecError,
    PathOrFile,
    Record,
    RecordKind,
    Schema,
    codec_error,
    kind_name,
    load_schema,
    parse_record_schema,
    read_body,
    reading_schema,
    reading_schema_of,
    resolve_schemas,
)
from frontierflow.schemas.jsonl import json_to_record

CONTAINER_MAGIC: Final = b"Obj\x01"
GZIP_MAGIC: Final = b"\x1f\x8b\x08"
WARC_SUFFIXES: Final = (".warc", ".warc.gz", ".arc", ".arc.gz")
SNIFF_BYTES: Final = 512
"""How many leading bytes `log_format` wants to see."""
CONTAINER_CODECS: Final = ("null", "deflate")

_READ_CHUNK: Final = 1 << 20
_MAX_BLOCK_BYTES: Final = 1 << 31
_DECOMPRESS_ERRORS: Final = (zlib.error, OSError, EOFError, lzma.LZMAError, ValueError)

LogItem: TypeAlias = tuple[int, Record | CodecError, bytes]
"""One entry of a log: (position, the record or why it could not be read, its raw bytes)."""


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
    name = kind_name(kind)
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
        except FASTAVRO_ERRORS as exc:
            raise codec_error(
                f"cannot write {name} container at record {max(count - 1, 0)}", exc
            ) from exc
    return count


_DECOMPRESSORS: Final[dict[str, Callable[[bytes], bytes]]] = {
    "null": bytes,
    "deflate": lambda data: zlib.decompress(data, -15),
    "bzip2": bz2.decompress,
    "xz": lzma.decompress,
}

_HEADER_SCHEMA: Final = parse_record_schema(
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
        writer = parse_record_schema(json.loads(meta["avro.schema"]))
    except (*FASTAVRO_ERRORS, RecursionError) as exc:
        raise codec_error("corrupt container: bad writer schema in the header", exc) from exc
    if kind is None:
        short = str(writer.get("name", "")).rpartition(".")[2]
        if short in SCHEMA_NAMES and load_schema(short)["name"] == writer["name"]:
            kind = short
    if kind is None:
        return reading_schema(writer), None
    return resolve_schemas(writer, reading_schema_of(kind))


def _read_container_header(handle: IO[bytes], kind: str | None) -> _Container:
    magic = handle.read(4)
    if magic != CONTAINER_MAGIC:
        raise CodecError(f"not an Avro container file: magic {magic!r}")
    try:
        header = read_body(handle, _HEADER_SCHEMA)
    except FASTAVRO_ERRORS as exc:
        raise codec_error("corrupt container header", exc) from exc
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
        yield max(first, start), codec_error("corrupt container block", exc), data
        return
    buffer = io.BytesIO(plain)
    for position in range(first, first + count):
        begin = buffer.tell()
        try:
            item: Record | CodecError = read_body(buffer, container.writer, container.reader)
        except FASTAVRO_ERRORS as exc:
            yield max(position, start), codec_error("bad record in container", exc), plain[begin:]
            return
        if position >= start:
            yield position, item, plain[begin : buffer.tell()]


def container_log(handle: IO[bytes], kind: str | None, start: int) -> Iterator[LogItem]:
    """Items of a container file from record `start`; a broken frame ends it with an error."""
    return _container_items(handle, kind, start, 0, 1)


def container_log_part(
    handle: IO[bytes], kind: str | None, part: int, parts: int
) -> Iterator[LogItem]:
    """The items of one of `parts` parts of a container file: those of the blocks whose
    ordinal (0, 1, 2, … in file order) is `part` modulo `parts`, so that parts can be read
    side by side. Every part reads every block header (to count the records before its
    blocks) and skips the other parts' data unread. A bad header is part 0's error item; a
    broken frame is the error item of the part its block belongs to, and ends every part.
    Over `part` in ``range(parts)``, the items are those of `container_log` from record 0.
    """
    if not 0 <= part < parts:
        raise ValueError(f"part must be in 0..{parts - 1}, got {part} of {parts}")
    return _container_items(handle, kind, 0, part, parts)


_SKIP_ANY: Final = 1 << 70
"""More records than a block header's count can hold (a varint of at most 10 bytes)."""


def _container_items(
    handle: IO[bytes], kind: str | None, start: int, part: int, parts: int
) -> Iterator[LogItem]:
    """`container_log` from record `start`, of the blocks whose ordinal is `part` modulo
    `parts` (`container_log_part`): the one loop both read through."""
    try:
        container = _read_container_header(handle, kind)
    except CodecError as error:
        if part == 0:
            yield start, error, b""
        return
    first = 0
    for ordinal in itertools.count():
        mine = ordinal % parts == part
        try:
            block = _next_block(handle, container, start - first if mine else _SKIP_ANY)
        except CodecError as error:
            if mine:
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
    name = None if kind is None else kind_name(kind)
    with _open_binary(source, "rb") as handle:
        for _, item, _ in container_log(handle, name, 0):
            if isinstance(item, CodecError):
                raise item
            yield item


def start_container(handle: IO[bytes], kind: RecordKind) -> bytes:
    """Write the header of an empty container of `kind` ("null" codec) at the handle's
    position and return its sync marker, for blocks written after it (`entry_blocks`)."""
    header = io.BytesIO()
    Writer(header, load_schema(kind_name(kind)), codec="null").flush()
    data = header.getvalue()
    handle.write(data)
    return data[-16:]  # a header ends with the file's sync marker (Avro spec)


def container_sync(handle: IO[bytes]) -> bytes:
    """The sync marker in the header of the container file `handle`, read from its start
    (the handle's position is left after the header); CodecError if it has none."""
    handle.seek(0)
    return _read_container_header(handle, None).sync


# --- logs: container or JSON lines, with errors as items -------------------------------------

LogFormat: TypeAlias = Literal["container", "warc", "jsonl"]


def looks_like_warc(head: bytes) -> bool:
    """Whether a file's first bytes are a WARC or ARC record, plain or in a gzip member."""
    if head.startswith(GZIP_MAGIC):
        try:
            head = zlib.decompressobj(31).decompress(head, 64)
        except zlib.error:
            return False
    return head.startswith((b"WARC/", b"filedesc://"))


def log_format(head: bytes, name: str = "") -> LogFormat:
    """What a log file is, from its first `SNIFF_BYTES` bytes and its name: an Avro container
    (magic ``Obj\\x01``), a WARC or ARC file (its first record, plain or gzipped, or a name
    ending in .warc, .warc.gz, .arc or .arc.gz), else JSON lines."""
    if head.startswith(CONTAINER_MAGIC):
        return "container"
    if looks_like_warc(head) or name.lower().endswith(WARC_SUFFIXES):
        return "warc"
    return "jsonl"


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
    name = kind_name(kind)
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
