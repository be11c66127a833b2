"""The unbounded Beam pipeline: the crawl clock counted in event time, state per shard of URLs.

The bounded pipeline (`beam.replay`) counts crawled pages exactly, in one ordered pass that
waits for the input to end. Nothing here waits for the end. Event time is `fetched_at`, cut
into fixed windows of W ms, and the clock comes from the pipeline's own running count:

Each step is a stateful step in the global window that holds its input until an event-time
timer past the window's due (the window's last millisecond) fires, 1 ms later per step, and
stamps its output at that timer (`event_time.REPEAT_AFTER_US`: why 1 ms).

1. `DecideRepeatFetchesByShard`: per URL, fetches in (window, position) order, the step core's
   `is_repeat_fetch` (keyed by a shard of the URL: `beam.shard_state`), 1 ms past the due;
   a repeat is dropped whole, as the bounded pipeline does, or, for a strategy that learns
   from repeats (LAFC), routed as a repeat (only its `Reinforce`, `fresh=False`). What it
   lets through it routes in the same firing by the step core's `keyed_messages` (the one
   routing function, which does not read the clock: `beam.routing`), each message with its
   clock's offset in its window (1 for a first fetch, which counts itself; 0 for a revisit
   or a repeat), gathered per state shard of the update with the pages the shard counted
   in the window: one item per repeat shard, state shard and window.
2. `UpdateFrontierInEventTime` (`beam.stream_update`): each repeat shard's messages of a
   window for a state shard come as one item, held until 3 ms past the due and merged then,
   keyed by shard (`beam.shard_state`: the shard's URL states in one records bag, so a
   window touches a few shard cells, not one cell per URL). Each shard keeps the crawl's
   running count from the counts every repeat shard sends it, so a window's messages get
   `crawled = before(w) + offset`, before(w) the pages counted in the windows before it;
   each URL's messages are applied with the strategy's own `apply`, in (window, position,
   index) order; out comes one record per URL and window: the state and the latest change
   per `change_key` (the step core's `apply_messages` and `keep_latest`).
   With the host rule, beside step 1: `PausesInEventTime` (`beam.hosts`): per shard of
   the hosts, a window's answers (deferred ones too) fold into their hosts' states 1 ms
   past the due, and the pauses they begin reach every shard of step 2 with the window's
   messages, which holds each entry emitted inside a pause until the pause ends (a
   shard keeps the pauses that can still hold an entry).

Staleness bound, by construction: an event of window w sees every page fetched before w
started and none fetched in w, so with n(w) the pages fetched in w (its crawl) and c the
exact count, c − (n(w) − 1) ≤ crawled ≤ c: the clock lags by at most n(w) − 1 pages, or W ms
of event time. With one page per window (W = 1 ms and distinct `fetched_at`) it is exact.
A strategy that never reads `crawled` (LAFC) gets exactly the engine's result for any W,
whenever `fetched_at` never decreases along the input. Effect on IECA: δ_t and α are step
functions of crawled div k (Golshani & ZarehBidoki 2012, eq. 12 and eq. 5,
Algorithm 1), so a lag of s pages changes them only for an event whose lag crosses a
multiple of k, by at most ⌈s/k⌉ steps: |Δδ_t| ≤ 0.28·(k/budget)·⌈s/k⌉ and
|Δα| ≤ 1 − e^(−β·⌈s/k⌉). Measured in the tests and the report.

Deterministic: every stateful step buffers its input and applies it in a fixed order when
an event-time timer says the watermark has passed, so the result does not depend on
processing speed or bundling. Orders: window, then position (a file's record index; Kafka's
offset, then partition), then message index. When `fetched_at` never decreases along the
input, that is the embedded engine's order. An element behind the watermark (late) would
be applied when it arrives, out of order: the Kafka source (`beam.kafka`) stamps records
with `fetched_at` and turns events already behind its watermark into dead letters.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import (
    BytesCoder,
    StrUtf8Coder,
    TupleCoder,
    VarIntCoder,
)
from apache_beam.pvalue import TaggedOutput
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import (
    ReadModifyWriteStateSpec,
    TimerSpec,
    on_timer,
)
from apache_beam.transforms.window import TimestampedValue

from frontierflow.pipelines.beam.event_time import (
    HELD_STATE,
    REPEAT_AFTER_US,
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
from frontierflow.pipelines.beam.exact_clock import decode_fetch, encode_fetch
from frontierflow.pipelines.beam.hosts import (
    PausesInEventTime,
)
from frontierflow.pipelines.beam.io import page_answers
from frontierflow.pipelines.beam.routing import RoutedWindow, WindowRoutes
from frontierflow.pipelines.beam.shard_state import (
    STATE_SHARDS,
    ShardStore,
    records_spec,
    state_shard,
)
from frontierflow.pipelines.beam.stream_revisits import (
    VISITS,
    RevisitsInEventTime,
    VisitItem,
    revisit_fetch,
    visit_item,
)
from frontierflow.pipelines.beam.stream_update import UpdateFrontierInEventTime
from frontierflow.pipelines.core.step import FetchKind, is_repeat_fetch
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy
from frontierflow.state.revisit_schedule import RevisitPolicy

# --- 1. repeats --------------------------------------------------------------------------------


class DecideRepeatFetchesByShard(beam.PTransform):
    """(position, event) → the routed windows (`beam.routing.RoutedWindow`: per state shard
    of the update, a window's keyed messages of the fetches let through and the pages they
    count), and with a revisit policy the visits (`beam.stream_revisits.VisitItem`), in the
    global window, stamped 1 ms past their clock window's due (`event_time.REPEAT_AFTER_US`).
    Keyed by a shard of the URL (`beam.shard_state`): the step core keeps a page's last cycle
    per URL, in its shard's records; a repeat is dropped, or with `keep_repeats` routed as a
    repeat. An event's window is that of its `fetched_at`, or with `by_arrival` that of the
    time its source stamped it with (`beam.kafka_io`: the broker's append time)."""

    def __init__(
        self,
        strategy: Strategy[Any],
        windows: ClockWindows,
        by_arrival: bool = False,
        shards: int = STATE_SHARDS,
        revisit: RevisitPolicy | None = None,
    ) -> None:
        super().__init__()
        self.strategy = strategy
        self.windows = windows
        self.by_arrival = by_arrival
        self.shards = shards
        self.revisit = revisit

    def expand(self, events: Any) -> Any:
        outputs = (
            events
            | "KeyByPage"
            >> beam.ParDo(_KeyByPage(self.windows, self.by_arrival, self.shards)).with_output_types(
                typehints.KV[int, PageFetch]
            )
            | "FirstFetches"
            >> beam.ParDo(_FirstFetches(self.strategy, self.revisit))
            .with_input_types(typehints.KV[int, PageFetch])
            .with_outputs(VISITS, main="routed")
        )
        routed = outputs.routed
        routed.element_type = RoutedWindow
        if self.revisit is None:
            return routed
        visits = outputs[VISITS]
        visits.element_type = VisitItem
        return routed, visits


class _KeyByPage(beam.DoFn):
    def __init__(self, windows: ClockWindows, by_arrival: bool, shards: int) -> None:
        self.windows = windows
        self.by_arrival = by_arrival
        self.shards = shards

    def process(
        self,
        item: tuple[int, FetchEvent],
        stamp: Any = beam.DoFn.TimestampParam,
    ) -> Iterator[Any]:
        position, event = item
        due, at = place_event(self.windows, event.fetched_at, stamp, self.by_arrival)
        value = (due, position, event.url, event.cycle, event.crawl_id, encode_fetch(event))
        yield TimestampedValue((state_shard(event.url, self.shards), value), at)


PageFetch = typehints.Tuple[int, int, str, int, str, bytes]
"""(due, position, url, cycle, crawl id, the event's bytes): a fetch keyed for the repeat
step, which holds it as it comes (`event_time.pending_spec`: why encoded) and reads only its
URL, cycle and crawl until it routes it."""


class _FirstFetches(beam.DoFn):
    # (the shard's generation, the due taken through), and the earliest due waiting
    HELD = ReadModifyWriteStateSpec(HELD_STATE, held_coder(with_through(VarIntCoder())))
    PENDING = pending_spec(  # the fetches not yet due
        TupleCoder(
            [
                VarIntCoder(),
                VarIntCoder(),
                StrUtf8Coder(),
                VarIntCoder(),
                StrUtf8Coder(),
                BytesCoder(),
            ]
        )
    )
    # the shard's pages' last crawled cycles (`beam.shard_state`), with `--revisit` each with
    # the page's revisit record (`state.revisit_schedule.PageSchedule`)
    RECORDS = records_spec()
    TIMER = TimerSpec("repeats_due", TimeDomain.WATERMARK)

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def __init__(self, strategy: Strategy[Any], revisit: RevisitPolicy | None = None) -> None:
        self.strategy = strategy
        self.keep_repeats = strategy.learns_from_repeats
        self.revisit = revisit
        self.store = ShardStore(
            VarIntCoder() if revisit is None else TupleCoder([VarIntCoder(), BytesCoder()])
        )

    def process(
        self,
        element: tuple[int, tuple[int, int, str, int, str, bytes]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        hold_unless_taken(element[1], held, pending, timer, REPEAT_AFTER_US)

    @on_timer(TIMER)
    def fire(
        self,
        shard: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        records: Any = beam.DoFn.StateParam(RECORDS),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        value, ready, rest = take_due(fired, held, pending, timer, REPEAT_AFTER_US)
        if not ready:
            return  # nothing taken: the state stands as it is
        index = self.store.load(shard, value[0] if value else None, records)
        changed: dict[str, Any] = {}  # this firing's records, over the index's
        routes = WindowRoutes(self.strategy, STATE_SHARDS)  # the update's shards
        for due, position, url, cycle, crawl_id, event in ready:
            known = changed[url] if url in changed else index.values.get(url)
            fetch = None
            if self.revisit is None:
                kind = FetchKind.REPEAT if is_repeat_fetch(known, cycle) else FetchKind.FIRST
                if kind is FetchKind.FIRST:
                    changed[url] = cycle
            else:
                fetch = decode_fetch(event)
                kind, record, visit = revisit_fetch(known, fetch, self.revisit)
                if visit is not None:
                    changed[url] = record
                    yield TaggedOutput(
                        VISITS, TimestampedValue(visit_item(visit, due, position), fired)
                    )
            if kind is FetchKind.REPEAT and not self.keep_repeats:
                continue
            if fetch is None:
                fetch = decode_fetch(event)
            routes.add(due, position, crawl_id, kind, fetch)
        for routed in routes.items():
            yield TimestampedValue(routed, fired)
        generation = self.store.commit(shard, index, changed, records)
        keep_taken(held, pending, (generation, ready[-1][0]), rest)


# --- the whole pipeline ------------------------------------------------------------------------


class StreamFrontier(beam.PTransform):
    """Checked `(position, FetchEvent)`s in (deferred answers too); one `UrlUpdate` per URL
    and clock window out (its version: the last message applied), in a list of one; with
    `hosts`, the entries emitted inside their group's pause held (`beam.hosts`). No step
    waits for the input to end. Clock windows of `fetched_at`, or of arrival
    with `by_arrival` (`DecideRepeatFetchesByShard`)."""

    def __init__(
        self,
        strategy: Strategy[Any],
        windows: ClockWindows,
        *,
        by_arrival: bool = False,
        hosts: HostPolicy | None = DEFAULT_POLICY,
        revisit: RevisitPolicy | None = None,
    ) -> None:
        super().__init__()
        if revisit is not None and not strategy.revisits_pages:
            raise ValueError(f"{strategy.name} schedules its own revisits: no --revisit")
        self.strategy = strategy
        self.windows = windows
        self.by_arrival = by_arrival
        self.hosts = hosts
        self.revisit = revisit

    def expand(self, events: Any) -> Any:
        strategy, windows = self.strategy, self.windows
        repeats = page_answers(events) | "Repeats" >> DecideRepeatFetchesByShard(
            strategy, windows, self.by_arrival, revisit=self.revisit
        )
        inputs = [repeats]
        if self.revisit is not None:
            inputs = [
                repeats[0],
                repeats[1] | "Revisits" >> RevisitsInEventTime(self.revisit, strategy.name),
            ]
        if self.hosts is not None:
            inputs.append(
                events | "Hosts" >> PausesInEventTime(self.hosts, windows, self.by_arrival)
            )
        update = UpdateFrontierInEventTime(strategy, revisits=self.revisit is not None)
        return [(inputs[0] if len(inputs) == 1 else tuple(inputs)) | "Update" >> update]
