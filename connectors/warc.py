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

The file is cut into records by `warc_records` (gzip members or declared lengths) and each
record parsed by `warc_capture` (warcio); here a parsed record becomes its FetchEvent.

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

import logging
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Final
from urllib.parse import urljoin, urlsplit

from warcio.recordloader import ArcWarcRecordLoader

from frontierflow.connectors.base import Failed, InputItem, Position
from frontierflow.connectors.htmlpages import page_links_and_terms
from frontierflow.connectors.warc_capture import (
    Capture,
    decoded_body,
    epoch_ms,
    is_html,
    parse_record,
)
from frontierflow.connectors.warc_records import RecordError, records_at
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.urls import is_http_url

log = logging.getLogger(__name__)

MAX_RAW_IN_DEAD_LETTER: Final = 65_536
"""Bytes of a bad record kept in its dead letter (the rest is cut, and the message says so)."""

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
        for index, (offset, raw) in enumerate(records_at(self.handle, limit)):
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
        capture = parse_record(self.loader, raw, with_payload=wanted)
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

    def _remember_referer(self, capture: Capture) -> None:
        referer = capture.headers.get_header("Referer") if capture.headers else None
        if capture.record_id and referer and is_http_url(referer.strip()):
            self.referers[capture.record_id] = referer.strip()
            if len(self.referers) > _MAX_REFERERS:
                self.referers.popitem(last=False)

    def _revisit(self, capture: Capture, via: str | None) -> FetchEvent:
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

    def _read_at(self, offset: int) -> Capture:
        """The capture at `offset`, read again; the handle is put back where it was."""
        here = self.handle.tell()
        try:
            self.handle.seek(offset)
            _, raw = next(records_at(self.handle, self.options.max_record_bytes))
        finally:
            self.handle.seek(here)
        if isinstance(raw, RecordError):
            raise raw
        return parse_record(self.loader, raw, with_payload=True)

    def _fetch_event(self, head: Capture, body: Capture, via: str | None) -> FetchEvent:
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
            if not is_html(body):
                content_type = body.headers.get_header("Content-Type") or "none"
                raise RecordError("NotHtml", f"{head.url}: content type {content_type!r}")
            # Queries kept: a WARC is someone else's crawl of any site, where "x?a" and
            # "x?b" can be different pages; the log says what the page linked to, as written.
            page = page_links_and_terms(head.url, decoded_body(body), keep_query=True)
            outlinks, terms = list(page.outlinks), page.terms
        host = (urlsplit(head.url).hostname or "").lower()
        return FetchEvent(
            url=head.url,
            fetched_at=epoch_ms(head.date),
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


def warc_items(
    handle: IO[bytes], name: str, start: int = 0, options: WarcOptions | None = None
) -> Iterator[InputItem]:
    """(position, FetchEvent or Failed, raw bytes) of every fetch record from record index
    `start` on. `handle` must be seekable (a revisit reads its original again); `name` is
    the default fetcher id."""
    reader = _WarcReader(handle, name, options or WarcOptions())
    return reader.items(start)
