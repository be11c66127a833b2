"""Step 2 of the unbounded form (`beam.stream`): a window's first fetches meet the crawl
clock before(w), the pages fetched before window w started, and are routed into keyed
messages by the step core.

Per crawl and routing shard, one stateful step in the global window takes a Flatten of
three inputs: the fetches straight from the source (each with its window's due), the
repeat step's verdicts on the fetches it calls repeats, and the page counts it sends, one
per repeat shard and window it fired for, each fanned out to every routing shard of its
crawl (`beam.stream.DecideRepeatFetchesByShard`). It holds them and, on an event-time timer
2 ms past a window's due, routes that window's fetches (less its repeats) with the pages
counted in the windows before it, then adds the window's own counts. Each routing shard
keeps the same running count, so the clock costs no step of its own, and a fetch's bytes
wait in this step only: the repeat step holds what it reads of a fetch (URL, cycle, crawl)
and sends verdicts for the repeats alone (`docs/results/beam.md`). Everything waiting
lives in Beam state, so a Flink checkpoint holds it and a restore rolls it back with the
rest of the job.

Why every verdict and count has come when the timer fires: the repeat step emits them
stamped 1 ms past the window's due (`event_time.REPEAT_AFTER_US`), and this step's timer is
set 1 ms later (`event_time.ROUTE_AFTER_US`), so the watermark passes it only once all of
them are in. A second delivery of any item is dropped (`event_time.each_delivery_once`).

Why not a side input, nor a windowed `CoGroupByKey` of the fetches and a running count (as
before): Flink's streaming operator for a step with side inputs (Beam's Flink runner 2.62)
cannot snapshot the main input it pushes back while it waits for the side input (a
`ClassCastException`), so no checkpoint of that form completed; on Prism a window's fetches
now and then ran before the side input was ready for it; and a windowed grouping now and
then grouped a window's fetches before its clock value arrived (`docs/results/beam.md`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import groupby
from operator import itemgetter
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import (
    BytesCoder,
    NullableCoder,
    TupleCoder,
    VarIntCoder,
)
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from frontierflow.pipelines.beam.event_time import (
    HELD_STATE,
    ROUTE_AFTER_US,
    ClockWindows,
    cheap_state_cache_accounting,
    held_coder,
    hold_unless_taken,
    keep_taken,
    pending_spec,
    place_event,
    take_due,
    with_through,
)
from frontierflow.pipelines.beam.shard_blocks import message_tuple
from frontierflow.pipelines.beam.shard_state import STATE_SHARDS, state_shard
from frontierflow.pipelines.core.step import crawl_clock, keyed_messages
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.schemas.codecs import decode_record, encode_record
from frontierflow.schemas.records import FetchEvent

ROUTE_SHARDS = 8
"""Keys per crawl over which a window's fetches are routed (by a hash of the URL): the
routing of one window runs on this many workers at most."""

COUNT, REPEAT, FETCH = 0, 1, 2
"""What a routing item is (`JoinItem`): a repeat shard's page count of a window, the repeat
step's verdict that a fetch is a repeat, or a fetch itself."""

Fetch = tuple[int, bool, FetchEvent]
"""(position, repeat, event) of a first fetch (or a repeat a strategy learns from)."""
ShardKey = typehints.Tuple[str, int]
JoinItem = typehints.Tuple[int, int, int, int, typehints.Optional[bytes]]
"""(due, position, kind, pages, the event's bytes): a fetch (`FETCH`, pages 0, its bytes:
decoded when its window is routed, `event_time.pending_spec`); the verdict that the fetch
at that position is a repeat (`REPEAT`, pages 0, no bytes); or a repeat shard's page count
of the window due then (`COUNT`, position: the shard's first in it, no bytes)."""
Routed = typehints.KV[int, typehints.List[typehints.Any]]


class AttachClock(beam.PTransform):
    """(the checked `(position, FetchEvent)`s, the repeat step's verdicts and page counts,
    `beam.stream.DecideRepeatFetchesByShard`) → (state shard, [(key, ordered keyed
    message), …]) in the global window, stamped 2 ms past their window's due: a window's
    messages of one routing shard, gathered per state shard of their key
    (`beam.shard_state.state_shard`), so the update step takes a few lists per window
    instead of one element per message. The fetches come straight from the source, each
    placed in its clock window as the repeat step places it (`event_time.place_event`);
    a repeat is dropped, or for a strategy that learns from repeats routed as one."""

    def __init__(
        self,
        strategy: Strategy[Any],
        windows: ClockWindows,
        by_arrival: bool = False,
        shards: int = STATE_SHARDS,
    ) -> None:
        super().__init__()
        self.strategy = strategy
        self.windows = windows
        self.by_arrival = by_arrival
        self.shards = shards

    def expand(self, pcolls: Any) -> Any:
        events, repeats, counts = pcolls
        fetches = events | "FetchesByShard" >> beam.ParDo(
            _KeyFetch(self.windows, self.by_arrival)
        ).with_output_types(typehints.KV[ShardKey, JoinItem])
        verdicts = repeats | "RepeatsToShards" >> beam.Map(_repeat_to_shard).with_output_types(
            typehints.KV[ShardKey, JoinItem]
        )
        fanned = counts | "CountsToShards" >> beam.FlatMap(_count_to_shards).with_output_types(
            typehints.KV[ShardKey, JoinItem]
        )
        return (
            (fetches, verdicts, fanned)
            | "FetchesAndCounts" >> beam.Flatten()
            | "Route"
            >> beam.ParDo(_RouteInOrder(self.strategy, self.shards))
            .with_input_types(typehints.KV[ShardKey, JoinItem])
            .with_output_types(Routed)
        )


def route_shard(url: str) -> int:
    """The routing shard of a page: CRC-32 of its URL, stable across processes."""
    return state_shard(url, ROUTE_SHARDS)


class _KeyFetch(beam.DoFn):
    def __init__(self, windows: ClockWindows, by_arrival: bool) -> None:
        self.windows = windows
        self.by_arrival = by_arrival

    def process(
        self,
        item: tuple[int, FetchEvent],
        stamp: Any = beam.DoFn.TimestampParam,
    ) -> Iterator[Any]:
        position, event = item
        due, at = place_event(self.windows, event.fetched_at, stamp, self.by_arrival)
        key = (event.crawl_id, route_shard(event.url))
        yield TimestampedValue((key, (due, position, FETCH, 0, encode_record(event))), at)


def _repeat_to_shard(verdict: tuple[str, tuple[int, int, str]]) -> Any:
    crawl_id, (due, position, url) = verdict
    return (crawl_id, route_shard(url)), (due, position, REPEAT, 0, None)


def _count_to_shards(count: tuple[str, tuple[int, int, int]]) -> Iterator[Any]:
    crawl_id, (due, position, pages) = count
    for shard in range(ROUTE_SHARDS):
        yield (crawl_id, shard), (due, position, COUNT, pages, None)


class _RouteInOrder(beam.DoFn):
    """Per (crawl, routing shard): the held fetches routed a window at a time, in window
    order, with the pages counted before the window, less the repeats (or marked, for a
    strategy that learns from them); the window's counts folded in after it."""

    # (pages counted in the windows taken, the last due taken), and the earliest due waiting
    HELD = ReadModifyWriteStateSpec(HELD_STATE, held_coder(with_through(VarIntCoder())))
    PENDING = pending_spec(  # the fetches, verdicts and counts not yet taken
        TupleCoder(
            [
                VarIntCoder(),
                VarIntCoder(),
                VarIntCoder(),
                VarIntCoder(),
                NullableCoder(BytesCoder()),
            ]
        )
    )
    # its own timer family name: the local runner keeps timers per family name within a
    # fused stage (`beam.event_time`)
    TIMER = TimerSpec("route_due", TimeDomain.WATERMARK)

    def __init__(self, strategy: Strategy[Any], shards: int) -> None:
        self.strategy = strategy
        self.shards = shards
        self.keep_repeats = strategy.learns_from_repeats

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def process(
        self,
        element: tuple[tuple[str, int], tuple[int, int, int, int, bytes | None]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        hold_unless_taken(element[1], held, pending, timer, ROUTE_AFTER_US)

    @on_timer(TIMER)
    def fire(
        self,
        key: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        value, ready, rest = take_due(fired, held, pending, timer, ROUTE_AFTER_US)
        if not ready:
            return
        counted = (value[0] if value else None) or 0
        for due, items in groupby(ready, key=itemgetter(0)):
            window = list(items)
            repeats = {position for _, position, kind, _, _ in window if kind == REPEAT}
            fetches = [
                (position, position in repeats, decode_record(FetchEvent, event))
                for _, position, kind, _, event in window
                if kind == FETCH and (self.keep_repeats or position not in repeats)
            ]
            if fetches:
                routed = route_window(self.strategy, due, counted, fetches)
                stamp = Timestamp(micros=due + ROUTE_AFTER_US)
                for shard_messages in by_state_shard(routed, self.shards).items():
                    yield TimestampedValue(shard_messages, stamp)
            counted += sum(pages for _, _, kind, pages, _ in window if kind == COUNT)
        keep_taken(held, pending, (counted, ready[-1][0]), rest)


def by_state_shard(
    routed: Iterable[tuple[str, Any]], shards: int
) -> dict[int, list[tuple[str, Any]]]:
    """(key, message)s gathered per state shard of their key, in their order."""
    out: dict[int, list[tuple[str, Any]]] = {}
    for key, message in routed:
        out.setdefault(state_shard(key, shards), []).append((key, message))
    return out


def route_window(
    strategy: Strategy[Any],
    due: int,
    pages_before: int,
    fetches: Iterable[Fetch],
) -> Iterator[Any]:
    """A window's fetches of one crawl (and shard) as (key, (due, position, index, crawled,
    now, message)): the step core's clock and routing, the order the per-URL step keeps."""
    for position, repeat, event in fetches:
        clock = crawl_clock(pages_before, repeat, event.fetched_at)
        messages = keyed_messages(strategy, event, repeat)
        for index, (key, message) in enumerate(messages):
            yield key, (due, position, index, clock.crawled, clock.now_ms, message_tuple(message))
