"""Step 2 of the unbounded form (`beam.stream`): the crawl clock, per window and crawl.

Per crawl, one stateful step in the global window holds the page counts the repeat step
sends, one per shard and window it fired for (a repeat counts 0, so a window of repeats
only still gets its value), each once by its position (`event_time.each_delivery_once`:
a second delivery of one is not a second count). On an event-time timer 2 ms past each
window's due (`event_time.CLOCK_AFTER_US`) it emits before(w), the pages fetched before
window w started, as (crawl id, (due, before(w))) stamped there, for
`beam.routing.AttachClock`.

Why counts held in state and not a windowed sum of them: a windowed combine emits at its
window's end, after the watermark has passed the due, and a running sum fed by it would
emit before(w) behind the watermark, later than the routing step may wait for it. Here
before(w) leaves on the count's own timer, whose hold keeps the watermark there until it
has left.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import TupleCoder, VarIntCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from frontierflow.pipelines.beam.event_time import (
    CLOCK_AFTER_US,
    HELD_STATE,
    cheap_state_cache_accounting,
    held_coder,
    hold_unless_taken,
    take_due,
    with_through,
)

ClockValue = typehints.KV[str, typehints.Tuple[int, int]]
"""(crawl id, (due µs of a clock window, pages fetched before it))."""
PageCount = typehints.KV[str, typehints.Tuple[int, int, int]]
"""(crawl id, (due µs of a clock window, the position of the shard's first fetch in it,
the pages among the shard's fetches in it: repeats count 0))."""


class WindowedCrawlClock(beam.PTransform):
    """Page counts (`PageCount`, from `beam.stream.DecideRepeatFetchesByShard`) → (crawl
    id, (due, before(w))), stamped 2 ms past w's due, for every window that holds a
    fetch."""

    def expand(self, counts: Any) -> Any:
        return counts | "RunningCount" >> beam.ParDo(_RunningPageCount()).with_input_types(
            PageCount
        ).with_output_types(ClockValue)


def before_each_window(
    total: int | None, ready: list[tuple[int, int, int]]
) -> tuple[list[tuple[int, int]], int]:
    """([(due, before(w))] for the windows of `ready` (its (due, position, pages) in due
    order), the pages counted once they are all in): `total` pages came before the first."""
    before = total or 0
    out: list[tuple[int, int]] = []
    for due, _, pages in ready:
        if not out or out[-1][0] != due:
            out.append((due, before))
        before += pages
    return out, before


class _RunningPageCount(beam.DoFn):
    """Per crawl: before(w) for each window w, in event-time order."""

    HELD = ReadModifyWriteStateSpec(
        HELD_STATE,  # (pages counted in windows due, the last due counted), and the rest
        held_coder(
            with_through(VarIntCoder()),
            TupleCoder([VarIntCoder(), VarIntCoder(), VarIntCoder()]),  # (due, position, pages)
        ),
    )
    TIMER = TimerSpec("clock_due", TimeDomain.WATERMARK)

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def process(
        self,
        element: tuple[str, tuple[int, int, int]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        hold_unless_taken(element[1], held, timer, CLOCK_AFTER_US)

    @on_timer(TIMER)
    def fire(
        self,
        key: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        counted, ready, rest = take_due(fired, held, timer, CLOCK_AFTER_US)
        if not ready:
            return
        values, total = before_each_window(counted[0] if counted else None, ready)
        for due, before in values:
            yield TimestampedValue((key, (due, before)), Timestamp(micros=due + CLOCK_AFTER_US))
        held.write(((total, ready[-1][0]), rest))
