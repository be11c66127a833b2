"""Step 3 of the unbounded form (`beam.stream`): a window's first fetches meet the crawl
clock before(w), and are routed into keyed messages by the step core.

They meet in state, not through a side input. Per crawl and routing shard, one stateful
step in the global window takes a Flatten of the fetches (each with its window's due) and
of the clock values before(w), each fanned out to every routing shard of its crawl. It
holds both and, on an event-time timer 3 ms past a window's due, routes that window's
fetches with before(w). Everything waiting lives in Beam state, so a Flink checkpoint holds
it and a restore rolls it back with the rest of the job.

Why not a side input (as before): Flink's streaming operator for a step with side inputs
(Beam's Flink runner 2.62) cannot snapshot the main input it pushes back while it waits for
the side input (a `ClassCastException`), so no checkpoint of the form completed; and on
Prism a window's fetches now and then ran before the side input was ready for it
(`ClockMissing`). Why not a windowed `CoGroupByKey` of the two: a window's fetches were now
and then grouped before its clock value arrived (`docs/RESULTS.md`).

The fetches leave the repeat step 1 ms past their window's due and the clock value before(w)
the running count 2 ms past it, stamped there (`beam.running_clock`), so both reach this
step before the watermark passes that. This step's timer is set 3 ms past the due, and the
routed messages are stamped there too, before the per-shard update's timer 4 ms past it
(`event_time.REPEAT_AFTER_US`). A window whose clock value has still not
come when the timer fires (a safety net) keeps its fetches and re-arms the timer at its
due, whose hold keeps the watermark below its messages' stamp until the value comes;
windows are routed in order, so nothing after a waiting window goes first. A clock value
sets the timer too, so a shard without fetches in
a window drops that window's value at once instead of keeping it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import (
    BooleanCoder,
    BytesCoder,
    ListCoder,
    NullableCoder,
    TupleCoder,
    VarIntCoder,
)
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from frontierflow.pipelines.beam.event_time import (
    HELD_STATE,
    ROUTE_AFTER_US,
    SECOND_DELIVERIES,
    cheap_state_cache_accounting,
    held_coder,
    hold_item,
    take_due,
    taken_before,
)
from frontierflow.pipelines.beam.shard_blocks import message_tuple
from frontierflow.pipelines.beam.shard_state import STATE_SHARDS, state_shard
from frontierflow.pipelines.core.step import crawl_clock, keyed_messages
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.schemas.codecs import decode_record
from frontierflow.schemas.records import FetchEvent

_log = logging.getLogger(__name__)

CLOCK_WAITS = Metrics.counter("frontierflow", "clock_waits")
"""Windows whose fetches found no clock value when the routing's timer fired, and wait
(the running count always sends one first when input comes on time: a wait means a value
was lost or came late, and the window holds the watermark until it comes)."""

ROUTE_SHARDS = 8
"""Keys per crawl over which a window's fetches are routed (by a hash of the URL): the
routing of one window runs on this many workers at most."""

Fetch = tuple[int, bool, FetchEvent]
"""(position, repeat, event) of a first fetch (or a repeat a strategy learns from)."""
ShardKey = typehints.Tuple[str, int]
JoinItem = typehints.Tuple[int, int, int, bool, typehints.Optional[bytes]]
"""(due, position, pages before, repeat, the event's bytes): a fetch (pages before: 0), or
with no event the clock value before(w) of the window due then (position −1, repeat
False). The event stays encoded until its window is routed (`event_time.held_coder`)."""
Routed = typehints.KV[int, typehints.List[typehints.Any]]


class AttachClock(beam.PTransform):
    """Windowed first fetches + the clock values (`beam.running_clock`) → (state shard,
    [(key, ordered keyed message), …]) in the global window, stamped 3 ms past their
    window's due: a window's messages of one routing shard, gathered per state shard of
    their key (`beam.shard_state.state_shard`), so the next grouping moves a few lists per
    window instead of one element per message."""

    def __init__(self, strategy: Strategy[Any], shards: int = STATE_SHARDS) -> None:
        super().__init__()
        self.strategy = strategy
        self.shards = shards

    def expand(self, pcolls: Any) -> Any:
        firsts, clock = pcolls
        fetches = firsts | "FetchesByShard" >> beam.Map(_fetch_by_shard).with_output_types(
            typehints.KV[ShardKey, JoinItem]
        )
        clocks = clock | "ClockToShards" >> beam.FlatMap(_clock_to_shards).with_output_types(
            typehints.KV[ShardKey, JoinItem]
        )
        return (
            (fetches, clocks)
            | "FetchesAndClock" >> beam.Flatten()
            | "Route"
            >> beam.ParDo(_RouteInOrder(self.strategy, self.shards))
            .with_input_types(typehints.KV[ShardKey, JoinItem])
            .with_output_types(Routed)
        )


def route_shard(url: str) -> int:
    """The routing shard of a page: CRC-32 of its URL, stable across processes."""
    return state_shard(url, ROUTE_SHARDS)


def _fetch_by_shard(first: tuple[str, tuple[int, int, bool, str, bytes]]) -> Any:
    crawl_id, (due, position, repeat, url, event) = first
    return (crawl_id, route_shard(url)), (due, position, 0, repeat, event)


def _clock_to_shards(value: tuple[str, tuple[int, int]]) -> Iterator[Any]:
    crawl_id, (due, pages_before) = value
    for shard in range(ROUTE_SHARDS):
        yield (crawl_id, shard), (due, -1, pages_before, False, None)


class ClockMissing(RuntimeError):
    """Fetches of a window met no clock value: raised by `route_window` rather than routing
    with a wrong clock (`_RouteInOrder` waits for the value instead of calling it)."""


ClockCell = tuple[int | None, list[tuple[int, int]], int | None]
"""The routing step's value: (the due of a window waiting for its clock value, or None;
the clock values (due, before(w)) not yet used, in due order; the due through which
windows are routed, or None)."""


class _RouteInOrder(beam.DoFn):
    """Per (crawl, routing shard): the held fetches routed a window at a time, in window
    order, with the window's clock value; a window without one waits for it."""

    HELD = ReadModifyWriteStateSpec(
        HELD_STATE,  # (waiting window, clock values), and the fetches not yet routed
        held_coder(
            TupleCoder(
                [
                    NullableCoder(VarIntCoder()),
                    ListCoder(TupleCoder([VarIntCoder(), VarIntCoder()])),
                    NullableCoder(VarIntCoder()),
                ]
            ),
            TupleCoder([VarIntCoder(), VarIntCoder(), BooleanCoder(), BytesCoder()]),
        ),
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
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        due, position, pages_before, repeat, event = element[1]
        value, pending = held.read() or (None, [])
        cell: ClockCell = value or (None, [], None)
        waiting, clocks, through = cell
        if taken_before(due, through):  # its window is routed: a second delivery
            SECOND_DELIVERIES.inc()
            return
        if event is not None:
            hold_item((due, position, repeat, event), pending, timer, ROUTE_AFTER_US)
        else:
            if (
                waiting is None
                and (not pending or due < pending[0][0])
                and (not clocks or due < clocks[0][0])
            ):
                timer.set(Timestamp(micros=due + ROUTE_AFTER_US))
            clocks.append((due, pages_before))
            clocks.sort()
        held.write(((waiting, clocks, through), pending))

    @on_timer(TIMER)
    def fire(
        self,
        key: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        value, _ = held.read() or (None, [])
        waiting, clocks, through = value or (None, [], None)
        routed_to = fired.micros - ROUTE_AFTER_US
        if waiting is not None:  # the timer that waits fires at the waiting window's due
            routed_to = max(routed_to, waiting)
        _, ready, rest = take_due(
            Timestamp(micros=routed_to + ROUTE_AFTER_US), held, timer, ROUTE_AFTER_US
        )
        before = dict(clocks)
        late = next((item[0] for item in ready if item[0] not in before), None)
        if late is not None and late != waiting:  # a window starts to wait: said once
            CLOCK_WAITS.inc()
            _log.warning(
                "crawl %r, routing shard %d: no clock value for the window due %d µs when "
                "its timer fired; its fetches wait for it (and hold the watermark)",
                key[0],
                key[1],
                late,
            )
        waiting = late
        if late is not None:  # no clock value yet: it and what follows wait for it
            routed_to = late - 1
            rest = [item for item in ready if item[0] >= late] + rest
            ready = [item for item in ready if item[0] < late]
            timer.set(Timestamp(micros=late))  # its hold: below the messages' stamp
        start = 0
        while start < len(ready):
            window_due = ready[start][0]
            end = start
            while end < len(ready) and ready[end][0] == window_due:
                end += 1
            window = ((p, r, decode_record(FetchEvent, e)) for _, p, r, e in ready[start:end])
            routed = route_window(self.strategy, key[0], window_due, before[window_due], window)
            stamp = Timestamp(micros=window_due + ROUTE_AFTER_US)
            for shard_messages in by_state_shard(routed, self.shards).items():
                yield TimestampedValue(shard_messages, stamp)
            start = end
        clocks = [(due, pages) for due, pages in clocks if due > routed_to]
        if late is None and clocks and (not rest or clocks[0][0] < rest[0][0]):
            timer.set(Timestamp(micros=clocks[0][0] + ROUTE_AFTER_US))
        through = routed_to if through is None else max(through, routed_to)
        held.write(((waiting, clocks, through), rest))


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
    crawl_id: str,
    due: int,
    pages_before: int | None,
    fetches: Iterable[Fetch],
) -> Iterator[Any]:
    """A window's fetches of one crawl (and shard) as (key, (due, position, index, crawled,
    now, message)): the step core's clock and routing, the order the per-URL step keeps."""
    if pages_before is None:
        raise ClockMissing(f"crawl {crawl_id!r}: no clock value for the window due {due} µs")
    for position, repeat, event in fetches:
        clock = crawl_clock(pages_before, repeat, event.fetched_at)
        messages = keyed_messages(strategy, event, repeat)
        for index, (key, message) in enumerate(messages):
            yield key, (due, position, index, clock.crawled, clock.now_ms, message_tuple(message))
