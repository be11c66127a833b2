"""The crawl-speed controller in the unbounded Beam form (`beam.stream_speed`): the live
engine's rule per fetcher, folded in event time."""

from __future__ import annotations

import random
from typing import Any

import apache_beam as beam
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp
from beam_state import Bag, Cell, Timer

from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.exact_clock import decode_fetch
from frontierflow.pipelines.beam.options import pipeline_options
from frontierflow.pipelines.beam.stream_speed import (
    SpeedInEventTime,
    _DecideInEventTime,
    _KeyByFetcher,
    speed_view,
)
from frontierflow.pipelines.speed.per_fetcher import counts_for_speed, decisions_in_order
from frontierflow.pipelines.speed.settings import settings_for
from frontierflow.schemas.records import ALREADY_FETCHED, FetchEvent, ScalingDecision
from frontierflow.state.speed import decode_speed_state

WINDOWS = ClockWindows(5)  # clock windows of 5 ms: dues at 4,999 µs, 9,999 µs, ...
FIXED = settings_for("fixed-3", window_ms=10)  # speed windows of 10 ms, always 3 threads


def _event(at: int, fetcher: str = "f", status: int = 200, **more: Any) -> FetchEvent:
    return FetchEvent(
        f"https://h.example/{at}", at, status, fetcher, "h.example", bytes=100, **more
    )


def _keyed(event: FetchEvent, position: int) -> tuple[str, tuple[int, int, bytes]] | None:
    """What the keying step sends the deciding step for `event` (None: not counted)."""
    outs = list(_KeyByFetcher(WINDOWS, False).process((position, event), Timestamp(0)))
    return outs[0].value if outs else None


def test_key_by_fetcher_holds_what_the_speed_windows_read_at_its_clock_window() -> None:
    event = _event(7, outlinks=("https://h.example/a",), text="words", fetch_ms=12.5)
    [out] = list(_KeyByFetcher(WINDOWS, False).process((42, event), Timestamp(0)))
    fetcher, (due, position, encoded) = out.value
    # fetched at 7 ms: the clock window [5, 10), due at its last millisecond, 9 ms
    assert (fetcher, due, position) == ("f", 9_000, 42)
    assert out.timestamp == Timestamp(micros=7_000)  # its own time, moved forward from 0
    assert decode_fetch(encoded) == speed_view(event)
    assert speed_view(event).outlinks == () and speed_view(event).text is None
    assert speed_view(event).fetch_ms == 12.5
    # not counted, as the engine: an answer without a download, a deferred answer; and one
    # the statistics refuse (latency of a day or more) is skipped
    for other in (
        _event(7, status=ALREADY_FETCHED),
        _event(7, status=429, will_retry=True),
        _event(7, fetch_ms=86_400_000.0),
    ):
        assert list(_KeyByFetcher(WINDOWS, False).process((1, other), Timestamp(0))) == []


def test_a_window_decides_at_the_firing_that_takes_the_event_past_its_end() -> None:
    """Events at 3, 7 and 12 ms of one fetcher, in the clock windows due at 4, 9 and 14 ms,
    speed windows [0, 10) and [10, 20): the firings 1 ms past the first two dues take 3,
    then 7 (nothing closes: the fetcher's watermark is 7 < 10); the one past 14 ms takes
    12, the watermark reaches 12 ≥ 10 + 0 (no allowed lateness) and [0, 10) closes: 2 pages
    in 10 ms, a crawl speed of 200 pages/s; 3 threads asked, 2 given (at most 2 requests
    on each host seen, and the window saw one)."""
    step, held, pending, timer = _DecideInEventTime(FIXED), Cell(), Bag(), Timer()
    for position, at in enumerate((3, 7, 12)):
        keyed = _keyed(_event(at), position)
        assert keyed is not None
        step.process(keyed, held, pending, timer)
    assert timer.at == 4_000 + 1_000  # 1 ms past the first due
    for fired, through, watermark in ((5_000, 4_000, 3), (10_000, 9_000, 7)):
        assert list(step.fire(Timestamp(micros=fired), held, pending, timer)) == []
        (state, taken), _ = held.value
        assert taken == through and decode_speed_state(state).watermark == watermark
    assert [r[:2] for r in pending.items] == [(14_000, 2)] and timer.at == 15_000
    [out] = list(step.fire(Timestamp(micros=15_000), held, pending, timer))
    decision = out.value
    assert out.timestamp == Timestamp(micros=15_000)
    assert (decision.fetcher_id, decision.window_start, decision.window_end) == ("f", 0, 10)
    assert (decision.pages, decision.crawl_speed, decision.threads_after) == (2, 200.0, 2)
    (state, through), earliest = held.value
    assert through == 14_000 and earliest is None and pending.items == []
    after = decode_speed_state(state)
    assert after.watermark == 12 and [w.start_ms for w in after.open_windows] == [10]
    # the event at 7 delivered again (Prism does now and then): dropped, nothing changes
    again = _keyed(_event(7), 1)
    assert again is not None
    step.process(again, held, pending, timer)
    assert held.value == ((state, 14_000), None) and pending.items == []


def _events(n: int, seed: int) -> list[FetchEvent]:
    """Three fetchers, one event a millisecond, a few failures and answers without a
    download."""
    rng = random.Random(seed)
    statuses = [200] * 8 + [503, ALREADY_FETCHED]
    return [
        _event(1_000 + i, f"f{rng.randrange(3)}", rng.choice(statuses), fetch_ms=rng.random())
        for i in range(n)
    ]


def test_the_unbounded_form_decides_as_the_live_engine_does() -> None:
    """On the local runner, the step's decisions over a stream equal `decisions_in_order`
    over the events the engine counts: the live engine's fold (no flush: the windows still
    open at the end decide nothing)."""
    events = _events(400, seed=5)
    settings = settings_for("hypothesis", window_ms=20)
    expected = decisions_in_order(filter(counts_for_speed, events), settings)
    assert len(expected) >= 3 * 15  # every fetcher decides for most of its 20 windows
    stamped = [TimestampedValue((i, e), e.fetched_at / 1000) for i, e in enumerate(events)]
    with beam.Pipeline(options=pipeline_options(["--runner=FnApiRunner"])) as pipeline:
        decisions = (
            pipeline
            | beam.Create(stamped)
            | beam.Map(lambda x: x).with_output_types(beam.typehints.Tuple[int, FetchEvent])
            | SpeedInEventTime(settings, WINDOWS)
        )
        assert_that(decisions, equal_to(expected))


def test_decisions_keep_each_fetchers_order() -> None:
    """`equal_to` above ignores order; a fetcher's decisions must also come in window order
    (the controller's state runs through them): each firing yields them in that order."""
    events = _events(120, seed=9)
    expected = decisions_in_order(filter(counts_for_speed, events), FIXED)
    step = _DecideInEventTime(FIXED)
    cells: dict[str, tuple[Cell, Bag, Timer]] = {}
    for position, event in enumerate(events):
        held, pending, timer = cells.setdefault(event.fetcher_id, (Cell(), Bag(), Timer()))
        if (keyed := _keyed(event, position)) is not None:
            step.process(keyed, held, pending, timer)
    got: list[ScalingDecision] = []
    for held, pending, timer in cells.values():
        while pending.items:
            fired = Timestamp(micros=timer.at)
            got += [out.value for out in step.fire(fired, held, pending, timer)]
    for fetcher in ("f0", "f1", "f2"):
        mine = [d for d in expected if d.fetcher_id == fetcher]
        assert [d for d in got if d.fetcher_id == fetcher] == mine
