"""`frontierflow bench-warc`: how fast a WARC becomes FetchEvents, beside its parsers alone.

Rows, each the median of `repeats` runs over the same file:
- `warcio records`: warcio's ArchiveIterator reading every record and its payload (the
  parser's ceiling, no HTML work);
- `fastwarc records`: the same with fastwarc, when it is installed (it is not a dependency);
- `fastwarc + extraction`: fastwarc's records through the same HTML extraction as ours
  (`htmlpages.page_links_and_terms`), to show what swapping the parser would give;
- `read_fetch_events`: the source `replay` uses (gzip members, warcio, extraction), in
  events/s and records/s.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from frontierflow.connectors.base import Failed
from frontierflow.connectors.htmlpages import page_links_and_terms
from frontierflow.connectors.logs import read_fetch_events


@dataclass(frozen=True, slots=True)
class WarcRow:
    """One way of reading the file: what it yields per second."""

    name: str
    seconds: float
    records: int
    events: int

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def _warcio_records(path: Path) -> tuple[int, int]:
    from warcio.archiveiterator import ArchiveIterator

    records = 0
    with path.open("rb") as handle:
        for record in ArchiveIterator(handle):
            record.content_stream().read()
            records += 1
    return records, 0


def _fastwarc(path: Path, extract: bool) -> tuple[int, int]:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    records = events = 0
    with path.open("rb") as handle:
        for record in ArchiveIterator(handle, parse_http=True):
            records += 1
            body = record.reader.read()
            if not extract or record.record_type != WarcRecordType.response:
                continue
            content_type = (record.http_headers.get("Content-Type") or "").split(";")[0]
            if content_type.strip().lower() == "text/html":
                url = (record.headers.get("WARC-Target-URI") or "").strip("<>")
                page_links_and_terms(url, body, keep_query=True)  # as connectors/warc.py
                events += 1
    return records, events


def _ours(path: Path) -> tuple[int, int]:
    records = events = 0
    for _, item, _ in read_fetch_events(path):
        records += 1
        events += not isinstance(item, Failed)
    return records, events


def bench_warc(path: Path, repeats: int = 3) -> list[WarcRow]:
    """The rows above for `path`."""
    ways: list[tuple[str, Callable[[Path], tuple[int, int]]]] = [
        ("warcio records", _warcio_records)
    ]
    try:
        import fastwarc  # noqa: F401

        ways += [
            ("fastwarc records", lambda p: _fastwarc(p, False)),
            ("fastwarc + extraction", lambda p: _fastwarc(p, True)),
        ]
    except ImportError:
        pass
    ways.append(("read_fetch_events", _ours))
    rows = []
    for name, read in ways:
        times = []
        counts = (0, 0)
        for _ in range(repeats):
            start = time.perf_counter()
            counts = read(path)
            times.append(time.perf_counter() - start)
        rows.append(WarcRow(name, statistics.median(times), *counts))
    return rows


def format_rows(rows: list[WarcRow]) -> str:
    lines = [
        "| reader | seconds | records | records/s | events | events/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.seconds:.3f} | {r.records} | {r.records_per_s:,.0f} | "
            f"{r.events} | {r.events_per_s:,.0f} |"
        )
    return "\n".join(lines)
