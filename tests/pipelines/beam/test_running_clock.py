"""The running crawl clock of the unbounded form: before(w) per window, each fetch once."""

from __future__ import annotations

from apache_beam.utils.timestamp import Timestamp
from beam_state import Cell, Timer

from frontierflow.pipelines.beam.event_time import CLOCK_AFTER_US
from frontierflow.pipelines.beam.running_clock import _RunningPageCount, before_each_window


def test_before_each_window_by_hand() -> None:
    # 3 pages before; window 1,000: pages at positions 4 and 6, a repeat at 5; window
    # 2,000: one page. before(1,000) = 3, before(2,000) = 3 + 2 = 5, then 6 in all.
    ready = [(1_000, 4, 1), (1_000, 5, 0), (1_000, 6, 1), (2_000, 7, 1)]
    assert before_each_window(3, ready) == ([(1_000, 3), (2_000, 5)], 6)
    assert before_each_window(None, [(9, 1, 0)]) == ([(9, 0)], 0)  # repeats only: a value


def test_a_fetch_delivered_twice_counts_once() -> None:
    count, held, timer = _RunningPageCount(), Cell(), Timer()
    for item in [(1_000, 0, 1), (1_000, 1, 1), (1_000, 1, 1), (1_000, 2, 0), (2_000, 3, 1)]:
        count.process(("crawl", item), held, timer)
    assert timer.at == 1_000 + CLOCK_AFTER_US  # 1 ms past the earliest window's due

    first = list(count.fire("crawl", Timestamp(micros=1_000 + CLOCK_AFTER_US), held, timer))
    assert [(v.value, v.timestamp.micros) for v in first] == [
        (("crawl", (1_000, 0)), 1_000 + CLOCK_AFTER_US)
    ]
    assert held.value[0] == (2, 1_000)  # positions 0, 1 (once) and a repeat; through 1,000
    assert timer.at == 2_000 + CLOCK_AFTER_US

    second = list(count.fire("crawl", Timestamp(micros=2_000 + CLOCK_AFTER_US), held, timer))
    assert [v.value for v in second] == [("crawl", (2_000, 2))]
    assert held.value == ((3, 2_000), [])
    # a fetch of a counted window delivered again: dropped, not a second page
    sets = len(timer.sets)
    count.process(("crawl", (2_000, 3, 1)), held, timer)
    assert held.value == ((3, 2_000), []) and len(timer.sets) == sets
