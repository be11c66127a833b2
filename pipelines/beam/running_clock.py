"""Step 2 of the unbounded form (`beam.stream`): the crawl clock, per window and crawl.

Per crawl, one stateful step in the global window counts the first fetches themselves, as
they come, per clock window (a repeat counts 0, so a window of repeats only still gets its
value). On an event-time timer 1 ms past each window's due (`event_time.CLOCK_AFTER_US`)
it emits before(w), the pages fetched before window w started, as (crawl id, (due,
before(w))) stamped there, for `beam.routing.AttachClock`.

Why the fetches and not a windowed count of them: a windowed combine emits at its window's
end, after the watermark has passed the due, and a running sum fed by it would emit
before(w) behind the watermark, later than the routing step may wait for it. Here before(w)
leaves on the count's own timer, whose hold keeps the watermark there until it has left.
"""

from __future__ import annotations

import bisect
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
    CLOCK_AFTER_US,
    HELD_STATE,
    cheap_state_cache_accounting,
    due_of,
    held_coder,
    take_due,
)
from frontierflow.schemas.records import FetchEvent

ClockValue = typehints.KV[str, typehints.Tuple[int, int]]
"""(crawl id, (due µs of a clock window, pages fetched before it))."""


class WindowedCrawlClock(beam.PTransform):
    """Windowed (crawl id, (position, repeat, event)) → (crawl id, (due, before(w))) in the
    global window, stamped 1 ms past w's due, for every window that holds a fetch."""

    def expand(self, firsts: Any) -> Any:
        return (
            firsts
            | "PageOrRepeat" >> beam.ParDo(_PageOrRepeat()).with_output_types(ClockValue)
            | "ToGlobalWindow" >> beam.WindowInto(GlobalWindows())
            | "RunningCount"
            >> beam.ParDo(_RunningPageCount())
            .with_input_types(ClockValue)
            .with_output_types(ClockValue)
        )


class _PageOrRepeat(beam.DoFn):
    def process(
        self,
        first: tuple[str, tuple[int, bool, FetchEvent]],
        window: Any = beam.DoFn.WindowParam,
    ) -> Iterator[tuple[str, tuple[int, int]]]:
        yield first[0], (due_of(window), 0 if first[1][1] else 1)


def count_until_due(due: int, pages: int, cell: Any, timer: Any) -> None:
    """Add `pages` to the count of the window due at `due` in the crawl's cell (its value:
    the pages counted in windows already due; its items: (due, pages) of the windows not
    yet due, in due order); the timer follows the earliest window, 1 ms past its due."""
    held: tuple[int | None, list[tuple[int, int]]] = cell.read() or (None, [])
    total, pending = held
    at = bisect.bisect_left(pending, due, key=lambda item: item[0])
    if at < len(pending) and pending[at][0] == due:
        pending[at] = (due, pending[at][1] + pages)
    else:
        pending.insert(at, (due, pages))
        if at == 0:
            timer.set(Timestamp(micros=due + CLOCK_AFTER_US))
    cell.write((total, pending))


class _RunningPageCount(beam.DoFn):
    """Per crawl: before(w) for each window w, in event-time order."""

    HELD = ReadModifyWriteStateSpec(
        HELD_STATE,  # pages counted in windows already due, and (due, pages) of the rest
        held_coder(VarIntCoder(), TupleCoder([VarIntCoder(), VarIntCoder()])),
    )
    TIMER = TimerSpec("clock_due", TimeDomain.WATERMARK)

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def process(
        self,
        element: tuple[str, tuple[int, int]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        count_until_due(*element[1], held, timer)

    @on_timer(TIMER)
    def fire(
        self,
        key: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        total, ready, rest = take_due(fired, held, timer, CLOCK_AFTER_US)
        if not ready:
            return
        before = total or 0
        for due, pages in ready:
            yield TimestampedValue((key, (due, before)), Timestamp(micros=due + CLOCK_AFTER_US))
            before += pages
        held.write((before, rest))
