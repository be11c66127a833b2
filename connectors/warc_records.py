"""The records of a WARC or ARC file as bytes, each with its file offset: the framing under
`warc` (which turns records into FetchEvents, `warc_capture` parsing each one).

A `.warc.gz` or `.arc.gz` file is a series of gzip members, one record each; a plain `.warc`
or `.arc` file is split by the length each record's header declares. What cannot be read
comes out in a record's place as a `RecordError` (the dead letter's error class and reason):
a corrupt gzip member (reading resumes at the next gzip header after its start), a member or
record cut short by the end of the file, a record with no readable length, a record larger
than the limit. An inflate call returns at most `_CHUNK` bytes and no more than the limit is
kept, so a small member cannot inflate without bound (no zip bombs).
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Iterator
from typing import IO, Final

from frontierflow.schemas.container import GZIP_MAGIC

_CHUNK: Final = 1 << 20
"""Most bytes one inflate call may return (no zip bombs)."""
_READ: Final = 1 << 16
"""Compressed bytes read at a time: small, as what follows a member's end is copied."""


class RecordError(Exception):
    """A record that cannot become a FetchEvent; `kind` is the dead letter's error class."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def records_at(handle: IO[bytes], limit: int) -> Iterator[tuple[int, bytes | RecordError]]:
    """Records from the handle's position (a record's own offset), whatever the file's start."""
    head = handle.read(4)
    handle.seek(-len(head), io.SEEK_CUR)
    if head.startswith(GZIP_MAGIC):
        return _gzip_members(handle, limit)
    return _plain_records(handle, limit)


def _gzip_members(handle: IO[bytes], limit: int) -> Iterator[tuple[int, bytes | RecordError]]:
    """(offset, plain bytes or why not) of each gzip member from the handle's position.

    A corrupt member yields one error and reading resumes at the next gzip header after its
    start; a member cut short by the end of the file yields a truncation error and ends."""
    offset = handle.tell()
    data = handle.read(_READ)
    while data:
        start = offset
        inflate = zlib.decompressobj(31)
        parts: list[bytes] = []
        size = 0
        too_large = False
        try:
            while True:
                plain = inflate.decompress(data, _CHUNK)
                # bounded output per call (no zip bombs); at the member's end the rest of the
                # input is `unused_data` (`unconsumed_tail` may keep a stale copy)
                while inflate.unconsumed_tail and not inflate.eof:
                    size += len(plain)
                    if size <= limit:
                        parts.append(plain)
                    plain = inflate.decompress(inflate.unconsumed_tail, _CHUNK)
                size += len(plain)
                if size <= limit:
                    parts.append(plain)
                else:
                    too_large = True
                if inflate.eof:
                    rest = inflate.unused_data
                    offset += len(data) - len(rest)
                    data = rest if rest else handle.read(_READ)
                    break
                offset += len(data)
                data = handle.read(_READ)
                if not data:
                    yield (
                        start,
                        RecordError(
                            "TruncatedRecord", f"gzip member at byte {start} ends with the file"
                        ),
                    )
                    return
        except zlib.error as exc:
            yield start, RecordError("CorruptGzipMember", f"gzip member at byte {start}: {exc}")
            offset, data = _next_member(handle, start + 1)
            continue
        if too_large:
            yield (
                start,
                RecordError(
                    "RecordTooLarge", f"record at byte {start} inflates to more than {limit} bytes"
                ),
            )
        else:
            yield start, b"".join(parts)


def _next_member(handle: IO[bytes], offset: int) -> tuple[int, bytes]:
    """(offset, data from there) of the next gzip header at or after `offset`."""
    handle.seek(offset)
    carry = b""
    base = offset
    while True:
        chunk = handle.read(_CHUNK)
        if not chunk:
            return base + len(carry), b""
        window = carry + chunk
        hit = window.find(GZIP_MAGIC)
        if hit >= 0:
            handle.seek(base + hit)
            return base + hit, handle.read(_READ)
        keep = len(GZIP_MAGIC) - 1
        base += len(window) - keep
        carry = window[-keep:]


def _plain_records(handle: IO[bytes], limit: int) -> Iterator[tuple[int, bytes | RecordError]]:
    """(offset, bytes or why not) of each record of an uncompressed WARC or ARC file, split by
    the length its header declares. A record with no readable length ends the file."""
    while True:
        start = handle.tell()
        head = b""
        while True:  # the header block: WARC ends it with an empty line, ARC is one line
            line = handle.readline(65_536)
            if not line:
                if head.strip():
                    yield start, RecordError("TruncatedRecord", f"record at byte {start}: no end")
                return
            if not head and not line.strip():
                start = handle.tell()  # blank lines between records
                continue
            head += line
            if not head.startswith(b"WARC/") or line in (b"\r\n", b"\n"):
                break
        length = _declared_length(head)
        if length is None or length < 0:
            yield start, RecordError("BadWarcRecord", f"record at byte {start}: no length")
            return
        if length > limit:
            yield (
                start,
                RecordError("RecordTooLarge", f"record at byte {start} declares {length} bytes"),
            )
            handle.seek(length, io.SEEK_CUR)
            continue
        body = handle.read(length)
        if len(body) < length:
            yield (
                start,
                RecordError(
                    "TruncatedRecord",
                    f"record at byte {start}: {len(body)} of {length} declared bytes",
                ),
            )
            return
        yield start, head + body


def _declared_length(head: bytes) -> int | None:
    try:
        if head.startswith(b"WARC/"):
            for line in head.split(b"\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    return int(value.strip())
            return None
        return int(head.split()[-1])  # ARC: URL IP date type length
    except (ValueError, IndexError):
        return None
