"""Steps 1 and 2 of the bounded replay (`beam.replay`): which fetches are repeats, and IECA's
crawl clock counted exactly over a log that does not fit one worker.

- `DecideRepeatFetches`: per URL, its fetches in input order through the step core's
  `is_repeat_fetch`. A repeat is dropped, or, for a strategy that `learns_from_repeats`
  (LAFC), kept and marked;
- `CountCrawledPages`: first fetches counted per (crawl, bucket of `CLOCK_BUCKET`
  positions), prefix sums over the buckets as one small side input.

Out comes every fetch keyed by its (crawl, bucket), and per bucket the pages of its crawl
fetched before it: `RouteFetchEvents` (step 3) gives each fetch its clock from these. The
unbounded form counts in event-time windows instead (`beam.stream`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from operator import attrgetter
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import FastPrimitivesCoder

from frontierflow.pipelines.beam.revisits import RECORDS, VISITS
from frontierflow.pipelines.core.revisit import page_fetch
from frontierflow.pipelines.core.step import FetchKind, is_repeat_fetch
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.hosts import group_key
from frontierflow.state.revisit_schedule import (
    PageSchedule,
    RevisitPolicy,
    encode_page_schedule,
)

CLOCK_BUCKET = 4096
"""Input positions per bucket of the distributed crawl clock (`CountCrawledPages`)."""

Fetch = typehints.Tuple[int, int, bytes]
"""(position, kind, the event's bytes): a fetch with the step core's verdict, a
`FetchKind` as an int (as a flag: whether it is not counted, `crawl_clock`'s `repeat`).
The event crosses both shuffles as the bytes `encode_fetch` gave it once, decoded only
where it is routed: a decode and an encode per stage less than as a typed record."""

_FIELDS = attrgetter(*(f.name for f in dataclasses.fields(FetchEvent)))
_PRIMITIVES = FastPrimitivesCoder()


def encode_fetch(event: FetchEvent) -> bytes:
    """An event as it crosses the Beam forms' shuffles and waits in their steps' bags: its
    fields, in order, as primitives. Inside one pipeline no schema has to travel with it,
    and this is ~7× cheaper than the Avro single-object encoding both ways (9 + 21 µs
    against 61 + 85 µs for a page of 27 links). An unbounded job's savepoint holds the
    events its steps were waiting for (a few seconds' worth): a job resumed from it by a
    newer version reads them while FetchEvent only gains fields, at its end, with
    defaults."""
    return _PRIMITIVES.encode(_FIELDS(event))


def decode_fetch(data: bytes) -> FetchEvent:
    """The event `encode_fetch` encoded."""
    return FetchEvent(*_PRIMITIVES.decode(data))


PageFetch = typehints.Tuple[int, int, str, bytes]
"""(position, cycle, crawl id, the event's bytes): what the repeat rule and the clock's
bucket read of a fetch, and the event."""
BucketKey = typehints.Tuple[str, int]
"""(crawl id, position // CLOCK_BUCKET): where a fetch's clock is computed."""


class DecideRepeatFetches(beam.PTransform):
    """Per URL, its fetches in input order through the step core's `is_repeat_fetch`:
    ((crawl id, bucket), (position, kind, event)) for every first fetch, and, with
    `keep_repeats` (a strategy that learns from repeats), for every repeat too. With a
    `revisit` policy the verdict is `page_fetch`'s (a revisit is routed, not counted), and
    out come also the visits and page records of `beam.revisits` (`VISITS`, `RECORDS`):
    the result is then (fetches, visits, records)."""

    def __init__(
        self, keep_repeats: bool, bucket: int | None = None, revisit: RevisitPolicy | None = None
    ) -> None:
        super().__init__()
        self.keep_repeats = keep_repeats
        self.bucket = CLOCK_BUCKET if bucket is None else bucket
        self.revisit = revisit

    def expand(self, events: Any) -> Any:
        ordered = (
            events
            | "ByPage"
            >> beam.MapTuple(
                lambda p, e: (e.url, (p, e.cycle, e.crawl_id, encode_fetch(e)))
            ).with_output_types(typehints.KV[str, PageFetch])
            | "PageFetches" >> beam.GroupByKey()
        )
        decide = beam.FlatMap(decide_repeats, self.keep_repeats, self.bucket, self.revisit)
        if self.revisit is None:
            return ordered | "InOrder" >> decide.with_output_types(typehints.KV[BucketKey, Fetch])
        out = ordered | "InOrder" >> decide.with_outputs(VISITS, RECORDS, main="fetches")
        fetches, visits, records = out.fetches, out[VISITS], out[RECORDS]
        fetches.element_type = typehints.KV[BucketKey, Fetch]
        visits.element_type = typehints.KV[str, typehints.Tuple[int, typehints.Any]]
        records.element_type = typehints.KV[str, bytes]
        return fetches, visits, records


def decide_repeats(
    grouped: tuple[str, Iterable[tuple[int, int, str, bytes]]],
    keep_repeats: bool,
    bucket: int,
    revisit: RevisitPolicy | None = None,
) -> Iterator[Any]:
    """One URL's fetches in input order, each with the step core's verdict; with `revisit`,
    its visits (tagged `VISITS`) and its final record (`RECORDS`) too. A fetch's event is
    decoded only when the revisit rule reads it."""
    url, fetches = grouped
    last: int | None = None
    record: PageSchedule | None = None
    for position, cycle, crawl_id, encoded in sorted(fetches, key=lambda f: f[0]):
        if revisit is None:
            kind = FetchKind.REPEAT if is_repeat_fetch(last, cycle) else FetchKind.FIRST
        else:
            event = decode_fetch(encoded)
            kind, record, visit = page_fetch(record, last, event, revisit)
            if visit is not None:
                host = group_key(visit.crawl_id, visit.host)
                yield beam.pvalue.TaggedOutput(VISITS, (host, (position, tuple(visit))))
        if kind is FetchKind.FIRST:
            last = cycle
        elif kind is FetchKind.REPEAT and not keep_repeats:
            continue
        yield (crawl_id, position // bucket), (position, int(kind), encoded)
    if record is not None:
        yield beam.pvalue.TaggedOutput(RECORDS, (url, encode_page_schedule(record)))


class CountCrawledPages(beam.PTransform):
    """The exact crawl clock as a distributed count: first fetches per (crawl, bucket of
    positions), then, as one small dict, the pages of each crawl fetched before each
    bucket (prefix sums). No worker holds more than one bucket's fetches: each counts its
    own per bucket, and one grouping merges the counts (`BucketCounts`)."""

    def expand(self, fetches: Any) -> Any:
        return (
            fetches
            | "FirstFetches" >> beam.Filter(lambda kv: kv[1][1] == FetchKind.FIRST)
            | "Buckets" >> beam.Map(lambda kv: kv[0])
            | "PerBucket" >> beam.CombineGlobally(BucketCounts())
            | "PagesBefore" >> beam.Map(pages_before_buckets)
        )


class BucketCounts(beam.CombineFn):
    """(crawl, bucket)s → how many of each, as one dict: counted where the fetches are,
    merged once."""

    def create_accumulator(self) -> dict[tuple[str, int], int]:
        return {}

    def add_input(
        self, counts: dict[tuple[str, int], int], bucket: tuple[str, int]
    ) -> dict[tuple[str, int], int]:
        counts[bucket] = counts.get(bucket, 0) + 1
        return counts

    def merge_accumulators(
        self, accumulators: Iterable[dict[tuple[str, int], int]]
    ) -> dict[tuple[str, int], int]:
        merged: dict[tuple[str, int], int] = {}
        for counts in accumulators:
            for bucket, count in counts.items():
                merged[bucket] = merged.get(bucket, 0) + count
        return merged

    def extract_output(self, counts: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        return counts


def pages_before_buckets(counts: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """(crawl, bucket) → pages of that crawl first fetched in earlier buckets."""
    before: dict[tuple[str, int], int] = {}
    totals: dict[str, int] = {}
    for crawl_id, bucket in sorted(counts):
        before[(crawl_id, bucket)] = totals.get(crawl_id, 0)
        totals[crawl_id] = totals.get(crawl_id, 0) + counts[(crawl_id, bucket)]
    return before
