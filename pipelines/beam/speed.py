"""Crawl-speed windows and thread scaling (Nandy, Sarkar & Das 2012) as an Apache Beam
pipeline.

Composite transforms with labelled steps, calling the same pure functions as the embedded
operator `per_fetcher.observe`:

- `AttachWatermarks`: per fetcher, in log order, each event with the fetcher's watermark
  before it (the largest earlier `fetched_at`) and `fetched_at` as its Beam timestamp;
- `WindowFetchEvents`: Beam's FixedWindows or SlidingWindows of the configured length;
- `DropLateEvents`: the stated late rule, per (event, window): an event whose watermark had
  already reached the window's end + allowed lateness is not counted in that window;
- `AggregateSpeedWindows`: `CombinePerKey` of `windows.add_event` / `windows.merge_windows`
  (integer sums, so any combining order gives the same window);
- `DecideThreads`: back to the global window, grouped by fetcher, the windows in end
  order folded through `controllers.decide` with the controller state in a Beam state spec.

On the same log the decisions equal `per_fetcher.decisions_from_log` (a test proves it on the
local FnApiRunner). Events `per_fetcher.speed_event_problem` refuses go to the `dead` output.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import BytesCoder
from apache_beam.transforms import window as beam_window
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec
from apache_beam.utils.timestamp import Timestamp

from frontierflow.pipelines.beam.event_time import cheap_state_cache_accounting
from frontierflow.pipelines.beam.options import pipeline_options, run_pipeline
from frontierflow.pipelines.speed.controllers import decide
from frontierflow.pipelines.speed.per_fetcher import initial_state, is_late, speed_event_problem
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.pipelines.speed.windows import add_event, merge_windows
from frontierflow.schemas.jsonl import record_to_json
from frontierflow.schemas.records import FetchEvent, ScalingDecision
from frontierflow.state.speed import (
    NO_WATERMARK,
    SpeedState,
    SpeedWindow,
    decode_speed_state,
    encode_speed_state,
)

DEAD = "dead"
FetcherEvent = typehints.KV[str, typehints.Tuple[int, FetchEvent]]
"""(fetcher id, (position, event)): events cross stages through their Avro coder."""


def _ms(ts: Timestamp) -> int:
    return int(ts.micros // 1000)


class AttachWatermarks(beam.PTransform):
    """(position, event) → timestamped (fetcher, (event, watermark before)); refused
    events → `dead` as (position, reason)."""

    def expand(self, items: Any) -> Any:
        attached = (
            items
            | "KeyByFetcher"
            >> beam.MapTuple(lambda p, e: (e.fetcher_id, (p, e))).with_output_types(FetcherEvent)
            | "ByFetcher" >> beam.GroupByKey()
            | "InLogOrder" >> beam.ParDo(_Watermarks()).with_outputs(DEAD, main="events")
        )
        attached.events.element_type = typehints.KV[str, typehints.Tuple[FetchEvent, int]]
        return attached


class _Watermarks(beam.DoFn):
    def process(self, grouped: tuple[str, Iterable[tuple[int, FetchEvent]]]) -> Iterator[Any]:
        fetcher, items = grouped
        watermark = NO_WATERMARK
        for position, event in sorted(items, key=lambda item: item[0]):
            problem = speed_event_problem(event)
            if problem is not None:
                yield beam.pvalue.TaggedOutput(DEAD, (position, problem))
                continue
            ts = Timestamp(micros=event.fetched_at * 1000)
            yield beam_window.TimestampedValue((fetcher, (event, watermark)), ts)
            watermark = max(watermark, event.fetched_at)


class WindowFetchEvents(beam.PTransform):
    """Beam's event-time windows of the configured length and slide."""

    def __init__(self, settings: ControllerSettings) -> None:
        super().__init__()
        self.settings = settings

    def expand(self, events: Any) -> Any:
        size = self.settings.window_ms / 1000.0
        if self.settings.slide_ms is None:
            fn: Any = beam_window.FixedWindows(size)
        else:
            fn = beam_window.SlidingWindows(size, self.settings.slide_ms / 1000.0)
        return events | "Window" >> beam.WindowInto(fn)


class DropLateEvents(beam.PTransform):
    """Keeps (fetcher, event) for the windows the event was on time for."""

    def __init__(self, settings: ControllerSettings) -> None:
        super().__init__()
        self.settings = settings

    def expand(self, windowed: Any) -> Any:
        return windowed | "OnTime" >> beam.ParDo(_OnTime(self.settings)).with_output_types(
            typehints.KV[str, FetchEvent]
        )


class _OnTime(beam.DoFn):
    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings

    def process(
        self,
        element: tuple[str, tuple[FetchEvent, int]],
        win: Any = beam.DoFn.WindowParam,
    ) -> Iterator[tuple[str, FetchEvent]]:
        fetcher, (event, watermark) = element
        if not is_late(watermark, _ms(win.end), self.settings):
            yield fetcher, event


_Acc = tuple[int, int, int, int, int, tuple[int, ...]]
"""A window's sums as a plain tuple (pages, failures, bytes, fetch_us, events, hosts), so
accumulators cross stages without pickling."""


def _acc_of(w: SpeedWindow) -> _Acc:
    return (w.pages, w.failures, w.bytes, w.fetch_us, w.events, w.hosts)


def _sums(acc: _Acc) -> SpeedWindow:
    return SpeedWindow(0, 0, acc[0], acc[1], acc[2], acc[3], acc[4], tuple(acc[5]))


class _SpeedWindowFn(beam.CombineFn):
    """Sums of one window without its bounds (added after, from the Beam window)."""

    def create_accumulator(self) -> _Acc:
        return _acc_of(SpeedWindow(0, 0))

    def add_input(self, acc: _Acc, event: FetchEvent) -> _Acc:
        return _acc_of(add_event(_sums(acc), event))

    def merge_accumulators(self, accs: Iterable[_Acc]) -> _Acc:
        it = iter(accs)
        out = _sums(next(it))
        for acc in it:
            out = merge_windows(out, _sums(acc))
        return _acc_of(out)

    def extract_output(self, acc: _Acc) -> tuple[int, ...]:
        return (*acc[:5], *acc[5])


class AggregateSpeedWindows(beam.PTransform):
    """(fetcher, event) per window → (fetcher, window tuple) in the global window."""

    def expand(self, on_time: Any) -> Any:
        return (
            on_time
            | "Sum" >> beam.CombinePerKey(_SpeedWindowFn())
            | "WithBounds"
            >> beam.ParDo(_WithBounds()).with_output_types(
                beam.typehints.KV[str, beam.typehints.Tuple[int, ...]]
            )
            | "Global" >> beam.WindowInto(beam_window.GlobalWindows())
        )


class _WithBounds(beam.DoFn):
    def process(
        self, element: tuple[str, tuple[int, ...]], win: Any = beam.DoFn.WindowParam
    ) -> Iterator[tuple[str, tuple[int, ...]]]:
        fetcher, sums = element
        yield fetcher, (_ms(win.start), _ms(win.end), *sums)


def _window_of(t: tuple[int, ...]) -> SpeedWindow:
    return SpeedWindow(t[0], t[1], t[2], t[3], t[4], t[5], t[6], tuple(t[7:]))


class DecideThreads(beam.PTransform):
    """Per fetcher: windows in end order through `controllers.decide`; out: ScalingDecisions."""

    def __init__(self, settings: ControllerSettings) -> None:
        super().__init__()
        self.settings = settings

    def expand(self, windows: Any) -> Any:
        return (
            windows
            | "ByFetcher" >> beam.GroupByKey()
            | "Decide"
            >> beam.ParDo(_Decide(self.settings))
            .with_input_types(tuple[str, Iterable[Any]])
            .with_output_types(ScalingDecision)
        )


class _Decide(beam.DoFn):
    STATE = ReadModifyWriteStateSpec("controller", BytesCoder())

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings

    def process(
        self,
        grouped: tuple[str, Iterable[tuple[int, ...]]],
        state: Any = beam.DoFn.StateParam(STATE),  # noqa: B008 (Beam's idiom)
    ) -> Iterator[ScalingDecision]:
        fetcher, windows = grouped
        raw = state.read()
        current: SpeedState = (
            initial_state(fetcher, self.settings) if raw is None else decode_speed_state(raw)
        )
        ctrl = current.controller
        for t in sorted(windows, key=lambda w: (w[1], w[0])):
            ctrl, decision = decide(ctrl, _window_of(t), fetcher, self.settings)
            yield decision
        state.write(encode_speed_state(SpeedState(fetcher, ctrl)))


def scaling_decisions(items: Any, settings: ControllerSettings) -> tuple[Any, Any]:
    """(position, FetchEvent) in; ScalingDecisions and dead (position, reason) out."""
    attached = items | "Watermarks" >> AttachWatermarks()
    on_time = (
        attached.events
        | "Windows" >> WindowFetchEvents(settings)
        | "DropLate" >> DropLateEvents(settings)
    )
    decisions = (
        on_time
        | "Aggregate" >> AggregateSpeedWindows()
        | "DecideThreads" >> DecideThreads(settings)
    )
    return decisions, attached[DEAD]


def decision_from_json(line: str) -> ScalingDecision:
    """A decision line written by this pipeline, back as a record."""
    return ScalingDecision.from_avro(json.loads(line))


def run_beam_speed(
    events: Iterable[FetchEvent],
    settings: ControllerSettings,
    out_prefix: str,
    beam_args: list[str] | None = None,
    runner: Any = None,
) -> None:
    """Decisions for a log of events: `<out>-decisions*.jsonl` and `<out>-dead*.jsonl`."""
    items = list(enumerate(events))
    options = pipeline_options(beam_args)

    def build(pipeline: beam.Pipeline) -> None:
        log = pipeline | "Log" >> beam.Create(items).with_output_types(
            typehints.Tuple[int, FetchEvent]
        )
        decisions, dead = scaling_decisions(log, settings)
        (
            decisions
            | "DecisionLines"
            >> beam.Map(lambda d: record_to_json(d.to_avro(), "ScalingDecision", validate=False))
            | "WriteDecisions" >> beam.io.WriteToText(out_prefix + "-decisions", ".jsonl")
        )
        (
            dead
            | "DeadJson" >> beam.Map(lambda d: json.dumps({"position": d[0], "reason": d[1]}))
            | "WriteDead" >> beam.io.WriteToText(out_prefix + "-dead", ".jsonl")
        )

    run_pipeline(options, build, runner=runner)


def read_beam_decisions(out_prefix: str) -> list[ScalingDecision]:
    """The decisions a run wrote, sorted by (fetcher, window end)."""
    prefix = Path(out_prefix)
    lines = [
        line
        for f in sorted(prefix.parent.glob(prefix.name + "-decisions*"))
        for line in f.read_text().splitlines()
    ]
    return sorted(
        (decision_from_json(x) for x in lines), key=lambda d: (d.fetcher_id, d.window_end)
    )
