"""The crawl-speed controller (Nandy, Sarkar & Das 2012) in the unbounded Beam form: per
fetcher, the live embedded engine's own rule, applied in event time.

The bounded form (`beam.speed`) groups a whole log by fetcher and uses Beam's windows; a
stream has no end to group to. Here one timer-ordered step keyed by fetcher holds the
fetcher's events (`event_time.hold_unless_taken`) and, when the watermark passes a clock
window's due, folds them in (window, position) order through `per_fetcher.observe`, the
function the embedded engine calls for every event, with the fetcher's `SpeedState` in
Beam state. So the windows, the late rule and the controller are the engine's, not a
second version of them: a window closes (and its ScalingDecision leaves) when a later
event of its fetcher passes its end plus the allowed lateness, as in a live job, which
never flushes its open windows either.

Which events count is the engine's choice too: every valid event that `counts_for_speed`
(repeats included; no answer without a download, no deferred answer); one the statistics
cannot use (`speed_event_problem`) is skipped and counted, as the engine skips it.

The same decisions as the live engine on the same events whenever both see each
fetcher's events in the same order: one partition, or events that are never late for
their windows (then a window's sums do not depend on the order). The fold's order is
(clock window of `fetched_at`, or of arrival with `by_arrival`; offset; partition).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import BytesCoder, TupleCoder, VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import TimestampedValue

from frontierflow.connectors.kafka import decision_record
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
from frontierflow.pipelines.speed.per_fetcher import counts_for_speed, observe, speed_event_problem
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.schemas.records import FetchEvent, ScalingDecision
from frontierflow.state.speed import decode_speed_state, encode_speed_state

SKIPPED = Metrics.counter("frontierflow", "speed_events_skipped")
"""Valid events the speed statistics cannot use (`speed_event_problem`)."""

HeldFetch = typehints.Tuple[int, int, bytes]
"""(due, position, the event's bytes as the speed windows read it)."""


def speed_view(event: FetchEvent) -> FetchEvent:
    """The event with only what the speed windows read (its fetcher, time, status, host,
    size and latency) and its URL: what the step holds, without links, terms or text."""
    return FetchEvent(
        event.url,
        event.fetched_at,
        event.status,
        event.fetcher_id,
        event.host,
        bytes=event.bytes,
        fetch_ms=event.fetch_ms,
    )


class SpeedInEventTime(beam.PTransform):
    """Checked `(position, FetchEvent)`s (deferred answers too) → `ScalingDecision`s, each
    stamped at the timer that closed its window."""

    def __init__(
        self, settings: ControllerSettings, windows: ClockWindows, by_arrival: bool = False
    ) -> None:
        super().__init__()
        self.settings = settings
        self.windows = windows
        self.by_arrival = by_arrival

    def expand(self, events: Any) -> Any:
        return (
            events
            | "KeyByFetcher"
            >> beam.ParDo(_KeyByFetcher(self.windows, self.by_arrival)).with_output_types(
                typehints.KV[str, HeldFetch]
            )
            | "DecideInEventTime"
            >> beam.ParDo(_DecideInEventTime(self.settings))
            .with_input_types(typehints.KV[str, HeldFetch])
            .with_output_types(ScalingDecision)
        )


class _KeyByFetcher(beam.DoFn):
    def __init__(self, windows: ClockWindows, by_arrival: bool) -> None:
        self.windows = windows
        self.by_arrival = by_arrival

    def process(
        self, item: tuple[int, FetchEvent], stamp: Any = beam.DoFn.TimestampParam
    ) -> Iterator[Any]:
        position, event = item
        if not counts_for_speed(event):
            return
        if speed_event_problem(event) is not None:
            SKIPPED.inc()
            return
        due, at = place_event(self.windows, event.fetched_at, stamp, self.by_arrival)
        held = (due, position, encode_fetch(speed_view(event)))
        yield TimestampedValue((event.fetcher_id, held), at)


class _DecideInEventTime(beam.DoFn):
    HELD = ReadModifyWriteStateSpec(
        HELD_STATE,  # (the fetcher's SpeedState, the due taken through), the earliest due
        held_coder(with_through(BytesCoder())),  # waiting
    )
    PENDING = pending_spec(TupleCoder([VarIntCoder(), VarIntCoder(), BytesCoder()]))  # events
    TIMER = TimerSpec("speed_due", TimeDomain.WATERMARK)

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings

    def process(
        self,
        element: tuple[str, tuple[int, int, bytes]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        hold_unless_taken(element[1], held, pending, timer, REPEAT_AFTER_US)

    @on_timer(TIMER)
    def fire(
        self,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        value, ready, rest = take_due(fired, held, pending, timer, REPEAT_AFTER_US)
        if not ready:
            return  # nothing taken: the state stands as it is
        state = None if value is None else decode_speed_state(value[0])
        for _, _, encoded in ready:
            state, decisions = observe(state, decode_fetch(encoded), self.settings)
            for decision in decisions:
                yield TimestampedValue(decision, fired)
        assert state is not None  # `ready` is not empty
        keep_taken(held, pending, (encode_speed_state(state), ready[-1][0]), rest)


def decision_records(decisions: Any, topic: str) -> Any:
    """ScalingDecisions as the (topic, key, value) records `WriteToKafka` sends: the
    records the embedded engine's `KafkaSink.write_decisions` sends."""
    return decisions | "DecisionRecords" >> beam.Map(
        lambda d: (topic, *decision_record(d))
    ).with_output_types(typehints.Tuple[str, bytes, bytes])
