"""Step 2 of the unbounded form (`beam.stream`): a window's first fetches meet the crawl
clock before(w), the pages fetched before window w started, and are routed into keyed
messages by the step core.

The clock is counted here, in state, not by a step of its own. Per crawl and routing shard,
one stateful step in the global window takes a Flatten of the fetches (each with its
window's due) and of the page counts the repeat step sends, one per repeat shard and window
it fired for, each fanned out to every routing shard of its crawl (`PAGE_COUNTS` in
`beam.stream`). It holds both and, on an event-time timer 2 ms past a window's due, routes
that window's fetches with the pages counted in the windows before it, then adds the
window's own counts. Each routing shard keeps the same running count, so no step between
the repeat step and this one is needed: a window's messages cross one timer-ordered step
fewer than with a running count of its own (`docs/results/beam.md`). Everything waiting
lives in Beam state, so a Flink checkpoint holds it and a restore rolls it back with the
rest of the job.

Why every count has come when the timer fires: the repeat step emits a window's fetches and
counts together, stamped 1 ms past the window's due (`event_time.REPEAT_AFTER_US`), and
this step's timer is set 1 ms later (`event_time.ROUTE_AFTER_US`), so the watermark passes
it only once all of them are in. A second delivery of a count (the same count from the same
shard and window) is dropped like any other item (`event_time.each_delivery_once`).

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
    cheap_state_cache_accounting,
    held_coder,
    hold_unless_taken,
    keep_taken,
    pending_spec,
    take_due,
    with_through,
)
from frontierflow.pipelines.beam.shard_blocks import message_tuple
from frontierflow.pipelines.beam.shard_state import STATE_SHARDS, state_shard
from frontierflow.pipelines.core.step import FetchKind, crawl_clock, keyed_messages
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.schemas.codecs import decode_record
from frontierflow.schemas.records import FetchEvent

ROUTE_SHARDS = 8
"""Keys per crawl over which a window's fetches are routed (by a hash of the URL): the
routing of one window runs on this many workers at most."""

Fetch = tuple[int, int, FetchEvent]
"""(position, kind, event) of a first fetch, a revisit (`--revisit`), or a repeat a strategy
learns from: the kind a `FetchKind`."""
ShardKey = typehints.Tuple[str, int]
JoinItem = typehints.Tuple[int, int, int, int, typehints.Optional[bytes]]
"""(due, position, pages, kind, the event's bytes): a fetch (pages 0), or with no event a
repeat shard's page count of the window due then (position: the shard's first in it,
kind 0). The event stays encoded until its window is routed
(`event_time.pending_spec`: why encoded)."""
Routed = typehints.KV[int, typehints.List[typehints.Any]]


class AttachClock(beam.PTransform):
    """(first fetches, page counts) of the repeat step (`beam.stream`) → (state shard,
    [(key, ordered keyed message), …]) in the global window, stamped 2 ms past their
    window's due: a window's messages of one routing shard, gathered per state shard of
    their key (`beam.shard_state.state_shard`), so the update step takes a few lists per
    window instead of one element per message."""

    def __init__(self, strategy: Strategy[Any], shards: int = STATE_SHARDS) -> None:
        super().__init__()
        self.strategy = strategy
        self.shards = shards

    def expand(self, pcolls: Any) -> Any:
        firsts, counts = pcolls
        fetches = firsts | "FetchesByShard" >> beam.Map(_fetch_by_shard).with_output_types(
            typehints.KV[ShardKey, JoinItem]
        )
        fanned = counts | "CountsToShards" >> beam.FlatMap(_count_to_shards).with_output_types(
            typehints.KV[ShardKey, JoinItem]
        )
        return (
            (fetches, fanned)
            | "FetchesAndCounts" >> beam.Flatten()
            | "Route"
            >> beam.ParDo(_RouteInOrder(self.strategy, self.shards))
            .with_input_types(typehints.KV[ShardKey, JoinItem])
            .with_output_types(Routed)
        )


def route_shard(url: str) -> int:
    """The routing shard of a page: CRC-32 of its URL, stable across processes."""
    return state_shard(url, ROUTE_SHARDS)


def _fetch_by_shard(first: tuple[str, tuple[int, int, bool, str, bytes]]) -> Any:
    crawl_id, (due, position, kind, url, event) = first
    return (crawl_id, route_shard(url)), (due, position, 0, kind, event)


def _count_to_shards(count: tuple[str, tuple[int, int, int]]) -> Iterator[Any]:
    crawl_id, (due, position, pages) = count
    for shard in range(ROUTE_SHARDS):
        yield (crawl_id, shard), (due, position, pages, 0, None)


class _RouteInOrder(beam.DoFn):
    """Per (crawl, routing shard): the held fetches routed a window at a time, in window
    order, with the pages counted before the window; the counts folded in after it."""

    # (pages counted in the windows taken, the last due taken), and the earliest due waiting
    HELD = ReadModifyWriteStateSpec(HELD_STATE, held_coder(with_through(VarIntCoder())))
    PENDING = pending_spec(  # the fetches and counts not yet taken
        TupleCoder(
            [
                VarIntCoder(),
                VarIntCoder(),
                VarIntCoder(),
                VarIntCoder(),  # the kind: 0 and 1 encode as the BooleanCoder repeat flag did
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

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def process(
        self,
        element: tuple[tuple[str, int], tuple[int, int, int, bool, bytes | None]],
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
            fetches = [
                (position, kind, decode_record(FetchEvent, event))
                for _, position, _, kind, event in window
                if event is not None
            ]
            if fetches:
                routed = route_window(self.strategy, due, counted, fetches)
                stamp = Timestamp(micros=due + ROUTE_AFTER_US)
                for shard_messages in by_state_shard(routed, self.shards).items():
                    yield TimestampedValue(shard_messages, stamp)
            counted += sum(pages for _, _, pages, _, event in window if event is None)
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
    for position, kind, event in fetches:
        clock = crawl_clock(pages_before, kind != FetchKind.FIRST, event.fetched_at)
        messages = keyed_messages(strategy, event, kind == FetchKind.REPEAT)
        for index, (key, message) in enumerate(messages):
            yield key, (due, position, index, clock.crawled, clock.now_ms, message_tuple(message))
