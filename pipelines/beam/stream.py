"""The unbounded Beam pipeline: IECA's crawl clock as a slowly changing side input.

The bounded pipeline (`beam_replay`) counts crawled pages exactly, in one ordered pass that
waits for the input to end. Nothing here waits for the end. Event time is `fetched_at`, cut
into fixed windows of W ms, and the clock comes from the pipeline's own count, fed back:

1. `DecideRepeatFetches`: per (crawl, URL), fetches in (window, position) order, the rule
   of `engine.is_repeat_fetch`; a repeat is dropped whole, as the bounded pipeline does,
   or, for a strategy that learns from repeats (LAFC), passed on marked as a repeat.
2. `WindowedCrawlClock`: per window and crawl, the first fetches in it (a combine); a
   running sum over the windows in event-time order gives before(w), the pages fetched
   before window w started, re-windowed into w.
3. `AttachClock`: in window w every first fetch gets `crawled = before(w) + 1` (a repeat
   `before(w)`: it does not count) from an `AsDict` side input and is routed by
   `beam_replay.keyed_messages` (the one routing function; a repeat gives only its
   `Reinforce` with `fresh=False`).
4. `UpdateFrontierInEventTime`: in the global window, per URL, the messages are applied
   with the strategy's own `apply`, in (window, position, index) order, once the watermark
   has passed their window; out comes one record per URL and window: the state and the
   latest change per `change_key` (`beam_replay.keep_latest`).

Staleness bound, by construction: an event of window w sees every page fetched before w
started and none fetched in w, so with n(w) the pages fetched in w (its crawl) and c the
exact count, c − (n(w) − 1) ≤ crawled ≤ c: the clock lags by at most n(w) − 1 pages, or W ms
of event time. With one page per window (W = 1 ms and distinct `fetched_at`) it is exact.
A strategy that never reads `crawled` (LAFC) gets exactly the engine's result for any W,
whenever `fetched_at` never decreases along the input. Effect on IECA: δ_t and α are step
functions of crawled div k (seed 001 eq. 12 and eq. 5,
Algorithm 1), so a lag of s pages changes them only for an event whose lag crosses a
multiple of k, by at most ⌈s/k⌉ steps: |Δδ_t| ≤ 0.28·(k/budget)·⌈s/k⌉ and
|Δα| ≤ 1 − e^(−β·⌈s/k⌉). Measured in the tests and the report.

Deterministic: every stateful step buffers its input and applies it in a fixed order when
an event-time timer says the watermark has passed, so the result does not depend on
processing speed or bundling. Orders: window, then position (a file's record index; Kafka's
offset, then partition), then message index. When `fetched_at` never decreases along the
input, that is the embedded engine's order. An element behind the watermark (late) would
be applied when it arrives, out of order: the Kafka source (`beam_kafka`) stamps records
with `fetched_at` and turns events already behind its watermark into dead letters.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import BytesCoder, FastPrimitivesCoder, VarIntCoder
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import (
    BagStateSpec,
    ReadModifyWriteStateSpec,
    TimerSpec,
    on_timer,
)
from apache_beam.transforms.window import FixedWindows, GlobalWindows, TimestampedValue
from apache_beam.utils.timestamp import Duration, Timestamp

from frontierflow.pipelines.beam.replay import (
    DEAD,
    ChangeRecord,
    DecodeFetchEvents,
    ReadFetchEventLog,
    _event_of,
    apply_to_state_cell,
    beam_strategy,
    change_records,
    message_tuple,
    record_change_key,
    write_results,
)
from frontierflow.pipelines.core.step import crawl_clock, is_repeat_fetch, keyed_messages
from frontierflow.pipelines.core.strategy import Strategy

CLOCK_EXACT = "exact"
CLOCK_WINDOWED = "windowed:"


@dataclass(frozen=True, slots=True)
class ClockWindows:
    """Event-time windows of `width_ms` over which the crawl clock is refreshed."""

    width_ms: int

    def __post_init__(self) -> None:
        if not isinstance(self.width_ms, int) or self.width_ms < 1:
            raise ValueError(f"clock window must be a whole number of ms >= 1: {self.width_ms}")

    def fixed(self) -> FixedWindows:
        return FixedWindows(Duration(micros=self.width_ms * 1000))

    def due_micros(self, event_ms: int) -> int:
        """The last millisecond of the window holding `event_ms`, in µs (see `_due_of`)."""
        return ((event_ms // self.width_ms + 1) * self.width_ms - 1) * 1000


def _due_of(window: Any) -> int:
    """The last millisecond of `window`, in µs. Not Beam's max_timestamp (end − 1 µs): the
    Fn API carries timer times in milliseconds, and a timer set at end − 1 µs would fire at
    end − 1 ms, before the items it is meant to release."""
    return int(window.end.micros) - 1000


def parse_clock(text: str) -> ClockWindows | None:
    """`exact` → None (the bounded pipeline); `windowed:W` → windows of W ms."""
    if text == CLOCK_EXACT:
        return None
    if text.startswith(CLOCK_WINDOWED):
        try:
            return ClockWindows(int(text[len(CLOCK_WINDOWED) :]))
        except ValueError as exc:
            raise ValueError(f"--clock {text!r}: {exc}") from exc
    raise ValueError(f"--clock must be 'exact' or 'windowed:W' (W in ms), got {text!r}")


# --- ordering by event-time timers ------------------------------------------------------------

_DUE = "due"
# Each timer-ordered step below declares its own BAG, DUE and TIMER specs and its own
# `process`: Beam keeps one on_timer callback per TimerSpec object, so the steps cannot
# share one spec (and a shared `process` would have to name it). `_buffer` and `_take_due`
# are the shared part.


def _buffer(item: tuple[Any, ...], bag: Any, due: Any, timer: Any) -> None:
    """Keep `item` (its first field: the microsecond it is due) until the watermark passes."""
    bag.add(item)
    pending = due.read()
    if pending is None or item[0] < pending:
        due.write(item[0])
        timer.set(Timestamp(micros=item[0]))


def _take_due(fired: Timestamp, bag: Any, due: Any, timer: Any) -> list[tuple[Any, ...]]:
    """The buffered items due by `fired`, in order; the rest stay, with the timer re-armed.

    The timer fired, so the watermark passed `fired`: no item due by then can still come.
    """
    ready: list[tuple[Any, ...]] = []
    rest: list[tuple[Any, ...]] = []
    for item in sorted(bag.read(), key=lambda i: (i[0], i[1])):
        (ready if item[0] <= fired.micros else rest).append(item)
    bag.clear()
    for item in rest:
        bag.add(item)
    if rest:
        due.write(rest[0][0])
        timer.set(Timestamp(micros=rest[0][0]))
    else:
        due.clear()
    return ready


# --- 1. repeats --------------------------------------------------------------------------------


class DecideRepeatFetches(beam.PTransform):
    """(position, event bytes) → (crawl id, (position, repeat, event bytes)) of first
    fetches, and with `keep_repeats` of repeats too, timestamped at the end of the event's
    clock window."""

    def __init__(self, windows: ClockWindows, keep_repeats: bool = False) -> None:
        super().__init__()
        self.windows = windows
        self.keep_repeats = keep_repeats

    def expand(self, events: Any) -> Any:
        return (
            events
            | "KeyByPage"
            >> beam.ParDo(_KeyByPage(self.windows)).with_output_types(
                typehints.KV[typehints.Tuple[str, str], typehints.Any]
            )
            | "FirstFetches"
            >> beam.ParDo(_FirstFetches(self.keep_repeats)).with_input_types(
                typehints.KV[typehints.Tuple[str, str], typehints.Any]
            )
        )


class _KeyByPage(beam.DoFn):
    def __init__(self, windows: ClockWindows) -> None:
        self.windows = windows

    def process(self, item: tuple[int, bytes]) -> Iterator[Any]:
        position, data = item
        event = _event_of(data)
        due = self.windows.due_micros(event.fetched_at)
        value = (due, position, event.cycle, data)
        yield TimestampedValue(((event.crawl_id, event.url), value), Timestamp(micros=due))


class _FirstFetches(beam.DoFn):
    BAG = BagStateSpec("pending", FastPrimitivesCoder())
    DUE = ReadModifyWriteStateSpec(_DUE, VarIntCoder())
    LAST = ReadModifyWriteStateSpec("last_cycle", VarIntCoder())
    TIMER = TimerSpec("due", TimeDomain.WATERMARK)

    def __init__(self, keep_repeats: bool) -> None:
        self.keep_repeats = keep_repeats

    def process(
        self,
        element: tuple[tuple[str, str], tuple[int, int, int, bytes]],
        bag: Any = beam.DoFn.StateParam(BAG),  # noqa: B008 (Beam's idiom)
        due: Any = beam.DoFn.StateParam(DUE),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        _buffer(element[1], bag, due, timer)

    @on_timer(TIMER)
    def fire(
        self,
        key: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        bag: Any = beam.DoFn.StateParam(BAG),  # noqa: B008
        due: Any = beam.DoFn.StateParam(DUE),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
        last: Any = beam.DoFn.StateParam(LAST),  # noqa: B008
    ) -> Iterator[Any]:
        crawl_id = key[0]
        last_cycle = last.read()
        for _, position, cycle, data in _take_due(fired, bag, due, timer):
            if is_repeat_fetch(last_cycle, cycle):
                if self.keep_repeats:
                    yield crawl_id, (position, True, data)
                continue
            last_cycle = cycle
            yield crawl_id, (position, False, data)
        if last_cycle is not None:
            last.write(last_cycle)


# --- 2. the clock ------------------------------------------------------------------------------


class WindowedCrawlClock(beam.PTransform):
    """Windowed (crawl id, (position, repeat, event)) → windowed (crawl id, pages fetched
    before the window); repeats do not count."""

    def __init__(self, windows: ClockWindows) -> None:
        super().__init__()
        self.windows = windows

    def expand(self, firsts: Any) -> Any:
        return (
            firsts
            | "FirstFetchesOnly" >> beam.Filter(lambda kv: not kv[1][1])
            | "PagesPerWindow" >> beam.combiners.Count.PerKey()
            | "WithWindowEnd"
            >> beam.ParDo(_WithWindowEnd()).with_output_types(
                typehints.KV[str, typehints.Tuple[int, int]]
            )
            | "ToGlobalWindow" >> beam.WindowInto(GlobalWindows())
            | "RunningSum"
            >> beam.ParDo(_RunningPageCount()).with_input_types(
                typehints.KV[str, typehints.Tuple[int, int]]
            )
            | "BackToClockWindows" >> beam.WindowInto(self.windows.fixed())
        )


class _WithWindowEnd(beam.DoFn):
    def process(
        self,
        counted: tuple[str, int],
        window: Any = beam.DoFn.WindowParam,
    ) -> Iterator[tuple[str, tuple[int, int]]]:
        yield counted[0], (_due_of(window), counted[1])


class _RunningPageCount(beam.DoFn):
    """Per crawl: before(w) for each window w, summing the windows in event-time order."""

    BAG = BagStateSpec("pending", FastPrimitivesCoder())
    DUE = ReadModifyWriteStateSpec(_DUE, VarIntCoder())
    TOTAL = ReadModifyWriteStateSpec("total", VarIntCoder())
    TIMER = TimerSpec("due", TimeDomain.WATERMARK)

    def process(
        self,
        element: tuple[str, tuple[int, int]],
        bag: Any = beam.DoFn.StateParam(BAG),  # noqa: B008
        due: Any = beam.DoFn.StateParam(DUE),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        _buffer(element[1], bag, due, timer)

    @on_timer(TIMER)
    def fire(
        self,
        key: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        bag: Any = beam.DoFn.StateParam(BAG),  # noqa: B008
        due: Any = beam.DoFn.StateParam(DUE),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
        total: Any = beam.DoFn.StateParam(TOTAL),  # noqa: B008
    ) -> Iterator[Any]:
        before = total.read() or 0
        for window_end, pages in _take_due(fired, bag, due, timer):
            yield TimestampedValue((key, before), Timestamp(micros=window_end))
            before += pages
        total.write(before)


# --- 3. clock and routing ----------------------------------------------------------------------


class AttachClock(beam.PTransform):
    """Windowed first fetches + the clock side input → (key, ordered keyed message)."""

    def __init__(self, strategy: Strategy[Any]) -> None:
        super().__init__()
        self.strategy = strategy

    def expand(self, pcolls: Any) -> Any:
        firsts, clock = pcolls
        return firsts | "Route" >> beam.ParDo(
            _RouteWithClock(self.strategy), beam.pvalue.AsDict(clock)
        ).with_output_types(typehints.KV[str, typehints.Any])


class _RouteWithClock(beam.DoFn):
    def __init__(self, strategy: Strategy[Any]) -> None:
        self.strategy = strategy

    def process(
        self,
        element: tuple[str, tuple[int, bool, bytes]],
        before: dict[str, int],
        window: Any = beam.DoFn.WindowParam,
    ) -> Iterator[Any]:
        crawl_id, (position, repeat, data) = element
        event = _event_of(data)
        clock = crawl_clock(before.get(crawl_id, 0), repeat, event.fetched_at)
        due = _due_of(window)
        messages = keyed_messages(self.strategy, event, repeat)
        for index, (key, message) in enumerate(messages):
            yield key, (due, position, index, clock.crawled, clock.now_ms, message_tuple(message))


# --- 4. per-URL state --------------------------------------------------------------------------


class UpdateFrontierInEventTime(beam.PTransform):
    """(url, ordered message) in the global window → (url, version, state, change records)
    per URL and window; version = (window end µs, position, index) of the last message
    applied; change records: the latest per change key of that window's changes."""

    def __init__(self, strategy: Strategy[Any]) -> None:
        super().__init__()
        self.strategy = strategy

    def expand(self, keyed: Any) -> Any:
        return (
            keyed
            | "ToGlobalWindow" >> beam.WindowInto(GlobalWindows())
            | "ApplyInEventTime"
            >> beam.ParDo(_ApplyInEventTime(self.strategy)).with_input_types(
                typehints.KV[str, typehints.Any]
            )
        )


class _ApplyInEventTime(beam.DoFn):
    BAG = BagStateSpec("pending", FastPrimitivesCoder())
    DUE = ReadModifyWriteStateSpec(_DUE, VarIntCoder())
    STATE = ReadModifyWriteStateSpec("state", BytesCoder())
    TIMER = TimerSpec("due", TimeDomain.WATERMARK)

    def __init__(self, strategy: Strategy[Any]) -> None:
        self.strategy = strategy

    def process(
        self,
        element: tuple[str, tuple[Any, ...]],
        bag: Any = beam.DoFn.StateParam(BAG),  # noqa: B008
        due: Any = beam.DoFn.StateParam(DUE),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        _buffer(element[1], bag, due, timer)

    @on_timer(TIMER)
    def fire(
        self,
        key: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        bag: Any = beam.DoFn.StateParam(BAG),  # noqa: B008
        due: Any = beam.DoFn.StateParam(DUE),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
        state: Any = beam.DoFn.StateParam(STATE),  # noqa: B008
    ) -> Iterator[Any]:
        ready = _take_due(fired, bag, due, timer)
        if not ready:
            return
        encoded, latest = apply_to_state_cell(
            self.strategy, key, state, ((crawled, now_ms, m) for *_, crawled, now_ms, m in ready)
        )
        version = tuple(ready[-1][:3])
        yield key, version, encoded, change_records(latest)


# --- the whole pipeline ------------------------------------------------------------------------


def stream_frontier(
    items: Any, strategy: Strategy[Any], source: str, windows: ClockWindows
) -> tuple[Any, Any]:
    """Positioned items in; (url, version, encoded state, change records) per URL and window
    and dead-letter JSON out. No step waits for the input to end."""
    decoded = items | "Decode" >> DecodeFetchEvents(source)
    firsts = (
        decoded.events
        | "Repeats" >> DecideRepeatFetches(windows, strategy.learns_from_repeats)
        | "ClockWindows" >> beam.WindowInto(windows.fixed())
    )
    clock = firsts | "Clock" >> WindowedCrawlClock(windows)
    keyed = (firsts, clock) | "AttachClock" >> AttachClock(strategy)
    return keyed | "Update" >> UpdateFrontierInEventTime(strategy), decoded[DEAD]


def compact_changes(
    grouped: tuple[str, Iterable[tuple[Any, bytes | None, Iterable[ChangeRecord]]]],
) -> tuple[str, bytes | None, tuple[ChangeRecord, ...]]:
    """A URL's per-window records → (url, final state, latest change per change key), as a
    compacted topic keeps them: the state of the latest record; of the changes, the latest
    per change key over the records in version order (a key owns the change keys it
    emits, so no other URL's records hold them)."""
    url, records = grouped
    ordered = sorted(records, key=lambda r: tuple(r[0]))
    latest: dict[Any, ChangeRecord] = {}
    for _, _, changes in ordered:
        for url_of_change, entry in changes:
            record = (url_of_change, entry)
            key = record_change_key(record)
            latest.pop(key, None)
            latest[key] = record
    return url, ordered[-1][1], tuple(latest.values())


def build_stream_replay(
    pipeline: beam.Pipeline,
    log: Any,
    strategy: Strategy[Any],
    out_prefix: str,
    windows: ClockWindows,
) -> None:
    """The unbounded form over a log file, written as `beam_replay.build_replay` writes: the
    change records are compacted per URL at the sink (the files are bounded; the update
    path is the same one `beam_kafka.build_kafka_stream` runs unbounded)."""
    items = pipeline | "Read" >> ReadFetchEventLog(log)
    changes, dead = stream_frontier(items, strategy, str(log), windows)
    results = (
        changes
        | "KeyChanges" >> beam.Map(lambda r: (r[0], r[1:]))
        | "ChangesByUrl" >> beam.GroupByKey()
        | "Compact" >> beam.Map(compact_changes)
    )
    write_results(results, dead, out_prefix)


def run_beam_stream_replay(
    log: Any,
    *,
    strategy_name: str,
    out_prefix: str,
    budget: int,
    windows: ClockWindows,
    seed: int = 0,
    beam_args: list[str] | None = None,
    strategy: Strategy[Any] | None = None,
) -> None:
    """Run the unbounded form over a log with the given pipeline options and wait for it;
    `strategy`, when given, is used as it is (as in `beam_replay.run_beam_replay`)."""
    strategy = beam_strategy(strategy_name, budget=budget, seed=seed, strategy=strategy)
    with beam.Pipeline(options=PipelineOptions(beam_args or [])) as pipeline:
        build_stream_replay(pipeline, log, strategy, out_prefix, windows)
