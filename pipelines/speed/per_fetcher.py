"""The crawl-speed operator keyed by fetcher: event-time windows in, decisions out.

`observe(state, event, settings)` folds one FetchEvent into its fetcher's windows and, when
the fetcher's event time passes a window's end (plus the allowed lateness), turns the
window into a `ScalingDecision` through the configured controller (`controllers.decide`).
Time comes only from `fetched_at`; the state is `frontierflow.state.speed.SpeedState`.

Late events (the stated rule): an event counts in every one of its windows that is still
open when it arrives. A window [start, end) closes as soon as the fetcher's watermark (the
largest `fetched_at` seen before) reaches end + allowed lateness; an event whose window has
closed is not counted in it (a published decision is never revised), and an event late for
all of its windows only increments `late_events`. Windows without events give no decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from frontierflow.pipelines.core.step import is_page_answer
from frontierflow.pipelines.speed.controllers import decide, initial_controller
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.pipelines.speed.windows import add_event, host_hash, window_starts
from frontierflow.schemas.records import ALREADY_FETCHED, FetchEvent, ScalingDecision
from frontierflow.state.speed import NO_WATERMARK, SpeedState, SpeedWindow


class InvalidSpeedEvent(ValueError):
    """A FetchEvent the speed statistics cannot use (negative time, NaN latency, …)."""


def counts_for_speed(event: FetchEvent) -> bool:
    """Whether a valid fetch enters its fetcher's speed windows: every fetch, repeats
    included (Nandy, Sarkar & Das 2012 count pages downloaded), but not an answer without a
    download (status `ALREADY_FETCHED`) nor a deferred one (`is_page_answer`: a 429, a
    503, no answer, asked again later). The embedded engine and the Beam form both ask
    this."""
    return event.status != ALREADY_FETCHED and is_page_answer(event)


def speed_event_problem(event: FetchEvent) -> str | None:
    """Why `event` cannot enter the statistics, or None (callers dead-letter it)."""
    if not event.fetcher_id:
        return "empty fetcher_id"
    if event.fetched_at < 0:
        return f"fetched_at before the epoch: {event.fetched_at}"
    if not (0.0 <= event.fetch_ms < 86_400_000.0):  # also NaN
        return f"fetch_ms not in [0, 1 day): {event.fetch_ms}"
    if event.bytes < 0 or event.bytes >= 2**40:
        return f"bytes not in [0, 2**40): {event.bytes}"
    return None


def initial_state(fetcher_id: str, settings: ControllerSettings) -> SpeedState:
    return SpeedState(fetcher_id, initial_controller(settings))


def is_late(watermark: int, window_end: int, settings: ControllerSettings) -> bool:
    """The late rule: a window is closed once the watermark reached end + allowed lateness."""
    return watermark != NO_WATERMARK and watermark >= window_end + settings.allowed_lateness_ms


def observe(
    state: SpeedState | None, event: FetchEvent, settings: ControllerSettings
) -> tuple[SpeedState, list[ScalingDecision]]:
    """Fold one event into its fetcher's windows; decide for every window it closes.

    Raises `InvalidSpeedEvent` for an event `speed_event_problem` refuses."""
    problem = speed_event_problem(event)
    if problem is not None:
        raise InvalidSpeedEvent(problem)
    if state is None:
        state = initial_state(event.fetcher_id, settings)
    windows = {w.start_ms: w for w in state.open_windows}
    counted = False
    hashed = host_hash(event.host)
    for start in window_starts(event.fetched_at, settings):
        end = start + settings.window_ms
        if is_late(state.watermark, end, settings):
            continue
        counted = True
        windows[start] = add_event(windows.get(start) or SpeedWindow(start, end), event, hashed)
    watermark = max(state.watermark, event.fetched_at)
    late = state.late_events + (0 if counted else 1)
    ready = [w for w in windows.values() if is_late(watermark, w.end_ms, settings)]
    still_open = tuple(
        sorted(
            (w for w in windows.values() if not is_late(watermark, w.end_ms, settings)),
            key=lambda w: w.start_ms,
        )
    )
    state = SpeedState(state.fetcher_id, state.controller, watermark, still_open, late)
    if not ready:  # the common case: no window closed, the controller is as it was
        return state, []
    return _close(state, sorted(ready, key=lambda w: w.end_ms), settings)


def _close(
    state: SpeedState, ready: list[SpeedWindow], settings: ControllerSettings
) -> tuple[SpeedState, list[ScalingDecision]]:
    ctrl = state.controller
    decisions = []
    for window in ready:
        ctrl, decision = decide(ctrl, window, state.fetcher_id, settings)
        decisions.append(decision)
    return replace(state, controller=ctrl), decisions


def flush(
    state: SpeedState, settings: ControllerSettings
) -> tuple[SpeedState, list[ScalingDecision]]:
    """End of input: every open window closes (Beam's final watermark does the same), and
    the watermark moves past them, so an event that arrives later for one of them (a replay
    resumed on a longer log) is late for it instead of opening it again for a second
    decision."""
    ready = sorted(state.open_windows, key=lambda w: w.end_ms)
    watermark = state.watermark
    if ready:
        watermark = max(watermark, ready[-1].end_ms + settings.allowed_lateness_ms)
    return _close(replace(state, open_windows=(), watermark=watermark), ready, settings)


def decisions_from_log(
    events: Iterable[FetchEvent], settings: ControllerSettings
) -> list[ScalingDecision]:
    """The reference run: `observe` keyed by fetcher over a log in order, then `flush`.
    Events `speed_event_problem` refuses are skipped (the engine dead-letters them)."""
    states, out = _observed(events, settings)
    for fetcher_id in sorted(states):
        _, decisions = flush(states[fetcher_id], settings)
        out += decisions
    return out


def decisions_in_order(
    events: Iterable[FetchEvent], settings: ControllerSettings
) -> list[ScalingDecision]:
    """What a live job decides over events in that order: `observe` keyed by fetcher, no
    `flush` (a stream does not end, so a window closes only when a later event of its
    fetcher passes it)."""
    return _observed(events, settings)[1]


def _observed(
    events: Iterable[FetchEvent], settings: ControllerSettings
) -> tuple[dict[str, SpeedState], list[ScalingDecision]]:
    states: dict[str, SpeedState] = {}
    out: list[ScalingDecision] = []
    for event in events:
        if speed_event_problem(event) is not None:
            continue
        states[event.fetcher_id], decisions = observe(states.get(event.fetcher_id), event, settings)
        out += decisions
    return states, out
