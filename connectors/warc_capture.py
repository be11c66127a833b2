"""One record of a WARC or ARC file, parsed by warcio: what `warc` needs of it to make a
FetchEvent (its type, ids, URL, date, HTTP status, headers and payload), its date in epoch
milliseconds, its body with transfer and content encodings undone.

The bytes come from `warc_records`; what cannot be parsed raises its `RecordError` with the
dead letter's error class: unparsable WARC or HTTP headers, a record that ends inside its
headers, an unreadable date, a body whose encoding cannot be undone.
"""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecordLoader
from warcio.statusandheaders import StatusAndHeadersParserException

from frontierflow.connectors.htmlpages import HTML_TYPES
from frontierflow.connectors.warc_records import RecordError


@dataclass(slots=True)
class Capture:
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


def parse_record(loader: ArcWarcRecordLoader, raw: bytes, with_payload: bool) -> Capture:
    """The capture in `raw`, one whole record; its payload is read only `with_payload`."""
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
    return Capture(
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


def epoch_ms(date: str | None) -> int:
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


def decoded_body(capture: Capture) -> bytes:
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


def is_html(capture: Capture) -> bool:
    content_type = (capture.headers.get_header("Content-Type") or "").split(";")[0]
    return content_type.strip().lower() in HTML_TYPES
