"""Step 2 of the unbounded form (`beam.stream`): the crawl clock, per window and crawl.

The first fetches of each clock window are counted (a combine per window), and a running
sum over the windows in event-time order, on an event-time timer in the global window,
gives before(w): the pages fetched before window w started, put back into w for
`beam.routing.AttachClock` to read as a side input.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import TupleCoder, VarIntCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindows, TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from frontierflow.pipelines.beam.event_time import (
    HELD_STATE,
    ClockWindows,
    buffer_until_due,
    cheap_state_cache_accounting,
    due_of,
    held_coder,
    take_due,
)


class WindowedCrawlClock(beam.PTransform):
    """Windowed (crawl id, (position, repeat, event)) → windowed (crawl id, pages fetched
    before the window), for every window that holds a fetch; repeats do not count (a window
    of repeats only still gets its value, so every fetch finds one in `AttachClock`)."""

    def __init__(self, windows: ClockWindows) -> None:
        super().__init__()
        self.windows = windows

    def expand(self, firsts: Any) -> Any:
        return (
            firsts
            | "PageOrRepeat"
            >> beam.Map(lambda kv: (kv[0], 0 if kv[1][1] else 1)).with_output_types(
                typehints.KV[str, int]
            )
            | "PagesPerWindow" >> beam.CombinePerKey(sum)
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
        yield counted[0], (due_of(window), counted[1])


class _RunningPageCount(beam.DoFn):
    """Per crawl: before(w) for each window w, summing the windows in event-time order."""

    HELD = ReadModifyWriteStateSpec(
        HELD_STATE,  # pages counted so far, and (window end, pages) of windows not yet due
        held_coder(VarIntCoder(), TupleCoder([VarIntCoder(), VarIntCoder()])),
    )
    TIMER = TimerSpec("clock_due", TimeDomain.WATERMARK)

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def process(
        self,
        element: tuple[str, tuple[int, int]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        buffer_until_due(element[1], held, timer)

    @on_timer(TIMER)
    def fire(
        self,
        key: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        total, ready, rest = take_due(fired, held, timer)
        if not ready:
            return
        before = total or 0
        for window_end, pages in ready:
            yield TimestampedValue((key, before), Timestamp(micros=window_end))
            before += pages
        held.write((before, rest))
