"""WARC and ARC files as a source of FetchEvents: the crawl logs archival crawlers write.

`warc_items` reads a `.warc`, `.warc.gz` or `.arc.gz` file record by record and turns each
response record into the FetchEvent a fetcher would have published: the outlinks and terms
of its HTML taken as `htmlpages.page_links_and_terms` takes them, queries kept. What comes
from where:

- `url` ← `WARC-Target-URI` (ARC: the URL of the header line); `host` ← its host, lower-cased;
- `fetched_at` ← `WARC-Date` (ARC: the archive date), in epoch milliseconds;
- `status` ← the HTTP status line; `bytes` ← the length of the HTTP payload as recorded
  (before any content encoding is undone); `content_hash` ← `WARC-Payload-Digest`;
- `via` ← the `Referer` header of the request record the response names in
  `WARC-Concurrent-To` (what wget and Heritrix write), else null;
- `fetch_ms` ← 0.0 (the schema's "not measured": a WARC does not record it);
- `fetcher_id` ← `WarcOptions.fetcher_id`, by default the file's name; `crawl_id` and `cycle`
  from `WarcOptions`; `echo` ← empty (see the step core's echo fill).

A 3xx response has its `Location` as its one outlink; other non-2xx responses have none.

Positions are record indexes in the file (one gzip member is one record, a corrupt member
counts as one), so a resumed replay skips exactly the records already committed. Records
that are not fetches (warcinfo, request, metadata, resource, ARC file headers, responses
for other schemes such as Heritrix's `dns:` lookups) take an index and yield nothing, like
blank lines of a JSON-lines log. What cannot become a FetchEvent becomes a `Failed` item
with a reason: a corrupt gzip member (reading resumes at
the next member), a truncated record, unparsable WARC or HTTP headers, a 2xx response that
is not HTML, a record larger than `max_record_bytes`, a revisit whose original is not in
the file.

A revisit record (a capture whose payload was identical to an earlier one) becomes a
FetchEvent of its own URL, date and status, with the links and terms of the original
capture it refers to (`WARC-Refers-To`, else the same `WARC-Payload-Digest`), read again
from the file and resolved against the revisit's URL. The step core treats a revisit of a
URL already fetched in the same cycle as a repeat, as for any log.
"""

from __future__ import annotations

import io
import logging
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any, Final
from urllib.parse import urljoin, urlsplit

from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecordLoader
from warcio.statusandheaders import StatusAndHeadersParserException

from frontierflow.connectors.base import Failed, InputItem, Position
from frontierflow.connectors.htmlpages import page_links_and_terms
from frontierflow.schemas.container import GZIP_MAGIC
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.urls import is_http_url

log = logging.getLogger(__name__)

HTML_TYPES: Final = ("text/html", "application/xhtml+xml")
MAX_RAW_IN_DEAD_LETTER: Final = 65_536
"""Bytes of a bad record kept in its dead letter (the rest is cut, and the message says so)."""

_CHUNK: Final = 1 << 20
"""Most bytes one inflate call may return (no zip bombs)."""
_READ: Final = 1 << 16
"""Compressed bytes read at a time: small, as what follows a member's end is copied."""
_MAX_REFERERS: Final = 100_000


@dataclass(frozen=True, slots=True)
class WarcOptions:
    """How a WARC's records become FetchEvents."""

    fetcher_id: str | None = None
    """The events' `fetcher_id`; None: the file's name."""
    crawl_id: str = "default"
    cycle: int = 0
    max_record_bytes: int = 64 << 20
    """A record that decompresses to more than this is refused (a dead letter)."""

    def __post_init__(self) -> None:
        if self.max_record_bytes < 1 or self.cycle < 0:
            raise ValueError("max_record_bytes must be >= 1 and cycle >= 0")


class RecordError(Exception):
    """A record that cannot become a FetchEvent; `kind` is the dead letter's error class."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# --- records: gzip members or plain records, with their file offsets ------------------------


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


# --- one record → a FetchEvent -------------------------------------------------------------


@dataclass(slots=True)
class _Capture:
    """What one parsed record says: its type, ids, URL, date, HTTP status and payload."""

    rec_type: str
    record_id: str | None
    url: str
    date: str | None
    status: int | None
    headers: Any
    payload: bytes
    truncated: bool
    concurrent_to: str | None
    refers_to: str | None
    digest: str | None


def _parse(loader: ArcWarcRecordLoader, raw: bytes, with_payload: bool) -> _Capture:
    stream = io.BytesIO(raw)
    try:
        record = loader.parse_record_stream(stream, ensure_http_headers=False)
    except StatusAndHeadersParserException as exc:
        raise RecordError("BadHttpHeaders", f"unparsable HTTP headers: {exc}") from exc
    except EOFError as exc:
        raise RecordError("TruncatedRecord", "record ends inside its headers") from exc
    except ArchiveLoadFailed as exc:
        raise RecordError("BadWarcRecord", f"unparsable record headers: {exc}") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordError("BadWarcRecord", f"unparsable record: {exc}") from exc
    headers = record.rec_headers
    payload = b""
    truncated = False
    if with_payload:
        payload = record.raw_stream.read()
        truncated = record.raw_stream.limit > 0
    status = None
    if record.http_headers is not None and record.rec_type in ("response", "revisit"):
        code = record.http_headers.get_statuscode()
        try:
            status = int(code)
        except (TypeError, ValueError) as exc:
            raise RecordError("BadHttpHeaders", f"HTTP status {code!r} is not a number") from exc
    return _Capture(
        rec_type=record.rec_type or "",
        record_id=headers.get_header("WARC-Record-ID"),
        url=(record.rec_headers.get_header("WARC-Target-URI") or "").strip("<> "),
        date=headers.get_header("WARC-Date"),
        status=status,
        headers=record.http_headers,
        payload=payload,
        truncated=truncated,
        concurrent_to=headers.get_header("WARC-Concurrent-To"),
        refers_to=headers.get_header("WARC-Refers-To"),
        digest=headers.get_header("WARC-Payload-Digest"),
    )


def _epoch_ms(date: str | None) -> int:
    """WARC-Date (ISO 8601, UTC) or an ARC date (YYYYMMDDhhmmss) in epoch milliseconds."""
    if not date:
        raise RecordError("BadWarcRecord", "record has no date")
    try:
        if date.isdigit():
            when = datetime.strptime(date[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC)
        else:
            when = datetime.fromisoformat(date.replace("Z", "+00:00"))
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
    except ValueError as exc:
        raise RecordError("BadWarcRecord", f"unreadable record date {date!r}") from exc
    return int(when.timestamp() * 1000)


def _decoded_body(capture: _Capture) -> bytes:
    """The payload with chunked transfer and gzip/deflate/br content encoding undone."""
    headers = capture.headers
    body = capture.payload
    try:
        if (headers.get_header("Transfer-Encoding") or "").lower() == "chunked":
            from warcio.bufferedreaders import ChunkedDataReader

            body = ChunkedDataReader(io.BytesIO(body)).read()
        encoding = (headers.get_header("Content-Encoding") or "").lower()
        if encoding in ("gzip", "x-gzip", "deflate", "br"):
            from warcio.bufferedreaders import DecompressingBufferedReader

            kind = "deflate" if encoding == "deflate" else "br" if encoding == "br" else "gzip"
            body = DecompressingBufferedReader(io.BytesIO(body), decomp_type=kind).read()
    except (zlib.error, ValueError, OSError, EOFError) as exc:
        raise RecordError("BadContentEncoding", f"cannot decode the body: {exc}") from exc
    return body


def _is_html(capture: _Capture) -> bool:
    content_type = (capture.headers.get_header("Content-Type") or "").split(";")[0]
    return content_type.strip().lower() in HTML_TYPES


def _cut(raw: bytes) -> bytes:
    return raw[:MAX_RAW_IN_DEAD_LETTER]


class _WarcReader:
    """The state of one pass over a file: request referers, originals for revisits."""

    def __init__(self, handle: IO[bytes], name: str, options: WarcOptions) -> None:
        self.handle = handle
        self.options = options
        self.fetcher_id = options.fetcher_id or name
        self.loader = ArcWarcRecordLoader()
        self.referers: OrderedDict[str, str] = OrderedDict()
        """request record id → its Referer (until its response takes it)."""
        self.originals: dict[str, int] = {}
        """record id and payload digest of each 2xx HTML response → its file offset."""

    def items(self, start: int) -> Iterator[InputItem]:
        limit = self.options.max_record_bytes
        for index, (offset, raw) in enumerate(_records_at(self.handle, limit)):
            if isinstance(raw, RecordError):
                if index >= start:
                    failed = Failed(raw.kind, str(raw), b"")
                    yield Position(None, index), failed, b""
                continue
            try:
                event = self._event(offset, raw, index >= start)
            except RecordError as exc:
                if index >= start:
                    message = str(exc)
                    if len(raw) > MAX_RAW_IN_DEAD_LETTER:
                        message += f" (raw bytes cut to the first {MAX_RAW_IN_DEAD_LETTER})"
                    yield Position(None, index), Failed(exc.kind, message, _cut(raw)), _cut(raw)
                continue
            if event is not None and index >= start:
                yield Position(None, index), event, b""

    def _event(self, offset: int, raw: bytes, wanted: bool) -> FetchEvent | None:
        """The record's FetchEvent (None for a record that is not a fetch); before the
        resume point (`wanted` false) only what later records need is remembered."""
        capture = _parse(self.loader, raw, with_payload=wanted)
        kind = capture.rec_type
        if kind == "request":
            self._remember_referer(capture)
            return None
        if kind not in ("response", "revisit"):
            return None
        if kind == "response" and capture.status is not None:
            if capture.record_id:
                self.originals.setdefault(capture.record_id, offset)
            if capture.digest:
                self.originals.setdefault(capture.digest, offset)
        via = self.referers.pop(capture.concurrent_to, None) if capture.concurrent_to else None
        if not wanted or not capture.url.lower().startswith(("http://", "https://")):
            return None  # Heritrix's dns: lookups and other schemes are no page fetches
        if capture.status is None:
            raise RecordError("BadHttpHeaders", f"{kind} record of {capture.url} has no HTTP head")
        if not is_http_url(capture.url):
            raise RecordError("BadWarcRecord", f"target is not an http(s) URL: {capture.url!r}")
        if kind == "revisit":
            return self._revisit(capture, via)
        if capture.truncated:
            raise RecordError("TruncatedRecord", f"record of {capture.url} is cut short")
        return self._fetch_event(capture, capture, via)

    def _remember_referer(self, capture: _Capture) -> None:
        referer = capture.headers.get_header("Referer") if capture.headers else None
        if capture.record_id and referer and is_http_url(referer.strip()):
            self.referers[capture.record_id] = referer.strip()
            if len(self.referers) > _MAX_REFERERS:
                self.referers.popitem(last=False)

    def _revisit(self, capture: _Capture, via: str | None) -> FetchEvent:
        offset = None
        if capture.refers_to:
            offset = self.originals.get(capture.refers_to)
        if offset is None and capture.digest:
            offset = self.originals.get(capture.digest)
        if offset is None:
            raise RecordError(
                "RevisitWithoutOriginal",
                f"revisit of {capture.url}: the capture it repeats is not earlier in this file",
            )
        original = self._read_at(offset)
        return self._fetch_event(capture, original, via)

    def _read_at(self, offset: int) -> _Capture:
        """The capture at `offset`, read again; the handle is put back where it was."""
        here = self.handle.tell()
        try:
            self.handle.seek(offset)
            _, raw = next(_records_at(self.handle, self.options.max_record_bytes))
        finally:
            self.handle.seek(here)
        if isinstance(raw, RecordError):
            raise raw
        return _parse(self.loader, raw, with_payload=True)

    def _fetch_event(self, head: _Capture, body: _Capture, via: str | None) -> FetchEvent:
        """The FetchEvent of `head` (URL, date, status) with the content of `body` (the
        same record, or the original of a revisit)."""
        status = head.status
        assert status is not None
        outlinks: list[str] = []
        terms: dict[str, int] | None = None
        if 300 <= status < 400:
            location = (head.headers.get_header("Location") or "").strip()
            target = urljoin(head.url, location) if location else ""
            outlinks = [target] if is_http_url(target) else []
        elif 200 <= status < 300:
            if not _is_html(body):
                content_type = body.headers.get_header("Content-Type") or "none"
                raise RecordError("NotHtml", f"{head.url}: content type {content_type!r}")
            # Queries kept: a WARC is someone else's crawl of any site, where "x?a" and
            # "x?b" can be different pages; the log says what the page linked to, as written.
            page = page_links_and_terms(head.url, _decoded_body(body), keep_query=True)
            outlinks, terms = list(page.outlinks), page.terms
        host = (urlsplit(head.url).hostname or "").lower()
        return FetchEvent(
            url=head.url,
            fetched_at=_epoch_ms(head.date),
            status=status,
            fetcher_id=self.fetcher_id,
            host=host,
            via=via,
            crawl_id=self.options.crawl_id,
            cycle=self.options.cycle,
            outlinks=tuple(outlinks),
            terms=terms,
            content_hash=body.digest,
            bytes=len(body.payload),
        )


def _records_at(handle: IO[bytes], limit: int) -> Iterator[tuple[int, bytes | RecordError]]:
    """Records from the handle's position (a record's own offset), whatever the file's start."""
    head = handle.read(4)
    handle.seek(-len(head), io.SEEK_CUR)
    if head.startswith(GZIP_MAGIC):
        return _gzip_members(handle, limit)
    return _plain_records(handle, limit)


def warc_items(
    handle: IO[bytes], name: str, start: int = 0, options: WarcOptions | None = None
) -> Iterator[InputItem]:
    """(position, FetchEvent or Failed, raw bytes) of every fetch record from record index
    `start` on. `handle` must be seekable (a revisit reads its original again); `name` is
    the default fetcher id."""
    reader = _WarcReader(handle, name, options or WarcOptions())
    return reader.items(start)
