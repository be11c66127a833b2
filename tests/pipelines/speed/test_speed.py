"""Nandy, Sarkar & Das 2012's rules, one by one, with expected values worked out by hand
from the equations; windows, the late rule, the baselines and the state codec."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontierflow.pipelines.speed.controllers import (
    autothrottle_delay,
    clamp_threads,
    decide,
    initial_controller,
)
from frontierflow.pipelines.speed.hypothesis import (
    dead_band_width,
    literal_e_cs,
    prose_e_cs,
    sign_exact,
    sign_with_dead_band,
    threads_rule,
)
from frontierflow.pipelines.speed.per_fetcher import (
    InvalidSpeedEvent,
    decisions_from_log,
    flush,
    observe,
)
from frontierflow.pipelines.speed.settings import (
    ControllerSettings,
    SpeedSettingsError,
    settings_for,
)
from frontierflow.pipelines.speed.windows import (
    add_host,
    crawl_speed,
    host_hash,
    merge_hosts,
    merge_windows,
    window_starts,
)
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.speed import (
    HOST_SAMPLE,
    ControllerState,
    SpeedState,
    SpeedWindow,
    Welford,
    decode_speed_state,
    encode_speed_state,
)
from frontierflow.state.storage.codec import StateCodecError


def _event(t_ms: int, status: int = 200, host: str = "a.example", fetcher: str = "f") -> FetchEvent:
    return FetchEvent(
        url=f"https://{host}/{t_ms}",
        fetched_at=t_ms,
        status=status,
        fetcher_id=fetcher,
        host=host,
        bytes=1000,
        fetch_ms=250.0,
    )


def _window(pages: int, hosts: int = 10, failures: int = 0, fetch_ms: float = 250.0) -> SpeedWindow:
    events = pages + failures
    return SpeedWindow(
        0,
        10_000,
        pages,
        failures,
        1000 * pages,
        round(fetch_ms * 1000) * events,
        events,
        tuple(sorted(host_hash(f"h{i}") for i in range(hosts))),
    )


# --- equations ---------------------------------------------------------------------------


def test_crawl_speed_eq1() -> None:
    assert crawl_speed(50, 10_000) == 5.0  # 50 pages / 10 s


def test_mean_and_deviation_eqs_2_and_7() -> None:
    w = Welford()
    for x in (2, 4, 4, 4, 5, 5, 7, 9):
        w = w.add(x)
    assert w.mean == 5.0  # 40 / 8
    assert w.stddev == pytest.approx(2.0)  # Σ(x−5)² = 32, /8 = 4, √4 = 2


def test_deviation_is_stable_where_eq6_cancels() -> None:
    values = [1e9 + 4, 1e9 + 7, 1e9 + 13, 1e9 + 16]
    w = Welford()
    for x in values:
        w = w.add(x)
    # deviations −6, −3, 3, 6: Σ² = 90, /4 = 22.5, √ = 4.743416…
    assert w.stddev == pytest.approx(math.sqrt(22.5), rel=1e-9)
    m = len(values)
    eq6 = (m * sum(x * x for x in values) - sum(values) ** 2) / m**2
    assert abs(eq6 - 22.5) > 1.0  # the paper's algebraic form loses the answer in floats


def test_f_with_dead_band_and_exact() -> None:
    assert sign_with_dead_band(0.1, 0.15) == 0  # inside the band: "stable"
    assert sign_with_dead_band(0.2, 0.15) == 1
    assert sign_with_dead_band(-0.2, 0.15) == -1
    assert sign_exact(0.0) == 0
    assert sign_exact(1e-300) == 1  # eq. 9 as printed: any positive float is +1
    assert sign_exact(-1e-300) == -1


def test_rule_table() -> None:
    assert [threads_rule(f) for f in (1, 0, -1)] == [-1, 0, 1]


def test_prose_e_cs_is_positive_when_speed_fell() -> None:
    assert prose_e_cs(8.0, 5.0) == 3.0
    assert prose_e_cs(5.0, 8.0) == -3.0


def test_literal_e_cs_eq8() -> None:
    # ξ_0 = 0, ξ_1 = 1 earlier, ξ_2 = 1.5 now: 0 + 1 − 1.5
    assert literal_e_cs(0.0 + 1.0, 1.5) == -0.5


def test_dead_band_width() -> None:
    s = ControllerSettings()
    # counting noise √(5/10) = 0.7071 × 2 = 1.414 > 0.15 × 5 = 0.75
    assert dead_band_width(5.0, 0.0, s) == pytest.approx(2 * math.sqrt(0.5))
    # a fast crawl: √(100/10) = 3.162 × 2 = 6.32 < 0.15 × 100 = 15
    assert dead_band_width(100.0, 0.0, s) == pytest.approx(15.0)
    # a noisy history: 2 × ξ = 20 wins
    assert dead_band_width(100.0, 10.0, s) == pytest.approx(20.0)


# --- bounds ------------------------------------------------------------------------------


def test_politeness_cap_and_bounds() -> None:
    s = ControllerSettings(max_per_host=2, min_threads=2, max_threads=8)
    assert clamp_threads(9, _window(30, hosts=3), s) == (6, "; politeness cap 6")  # 2 × 3 hosts
    assert clamp_threads(9, _window(30, hosts=10), s) == (8, "; max 8")
    assert clamp_threads(1, _window(30, hosts=10), s) == (2, "; min 2")
    assert clamp_threads(5, _window(30, hosts=10), s) == (5, "")


@pytest.mark.parametrize(
    "overrides",
    [
        {"controller": "magic"},
        {"window_ms": 0},
        {"slide_ms": 3000},  # does not divide 10 000
        {"allowed_lateness_ms": -1},
        {"min_threads": 5, "initial_threads": 4},
        {"max_threads": 3},  # below initial 4
        {"dead_band": math.nan},
        {"dead_band": 1.0},
        {"zeros_to_stop": 7},  # more than the list holds (6)
        {"critic_low": 1.2},
        {"critic_high": 1.0},
        {"aimd_factor": 0.0},
        {"max_per_host": 0},
        {"autothrottle_target": math.inf},
    ],
)
def test_invalid_settings_are_refused(overrides: dict[str, object]) -> None:
    with pytest.raises(SpeedSettingsError):
        ControllerSettings(**overrides)  # type: ignore[arg-type]


def test_controller_names() -> None:
    assert settings_for("fixed-16").fixed_threads == 16
    assert settings_for("hypothesis-literal").controller == "hypothesis-literal"
    with pytest.raises(SpeedSettingsError):
        settings_for("fixed-many")
    with pytest.raises(SpeedSettingsError):
        settings_for("fixed-0")


# --- windows and the late rule ------------------------------------------------------------


def test_window_assignment() -> None:
    assert window_starts(12_345, ControllerSettings()) == [10_000]
    sliding = ControllerSettings(window_ms=10_000, slide_ms=5_000)
    assert window_starts(12_345, sliding) == [5_000, 10_000]


def test_late_event_is_dropped_after_its_window_closed() -> None:
    s = ControllerSettings(controller="fixed", fixed_threads=3)
    state, out = observe(None, _event(1_000), s)
    state, out = observe(state, _event(11_000), s)  # watermark 11 000 ≥ end 10 000: closes
    assert [(d.window_start, d.pages) for d in out] == [(0, 1)]
    state, out = observe(state, _event(9_000), s)  # its window is closed: late
    assert out == [] and state.late_events == 1
    state, out = flush(state, s)
    assert [(d.window_start, d.pages) for d in out] == [(10_000, 1)]


def test_a_window_closed_at_the_end_of_input_stays_closed() -> None:
    """flush closes the open windows and moves the watermark past them: an event for one
    of them arriving afterwards (a replay resumed on a longer log) is late, not a second
    decision for the same window. With 2 s of allowed lateness the watermark goes to
    10 000 + 2 000; the window [10 000, 20 000) has not closed and still opens."""
    s = ControllerSettings(controller="fixed", allowed_lateness_ms=2_000)
    state, _ = observe(None, _event(1_000), s)
    state, out = flush(state, s)
    assert [(d.window_start, d.pages) for d in out] == [(0, 1)]
    assert state.watermark == 12_000
    state, out = observe(state, _event(9_000), s)
    assert out == [] and state.late_events == 1 and state.open_windows == ()
    state, out = observe(state, _event(15_000), s)
    assert out == [] and [w.start_ms for w in state.open_windows] == [10_000]
    _, out = flush(state, s)
    assert [(d.window_start, d.pages) for d in out] == [(10_000, 1)]


def test_allowed_lateness_keeps_the_window_open() -> None:
    s = ControllerSettings(controller="fixed", allowed_lateness_ms=2_000)
    state, out = observe(None, _event(1_000), s)
    state, out = observe(state, _event(11_000), s)  # 11 000 < 10 000 + 2 000: still open
    assert out == []
    state, out = observe(state, _event(9_000), s)  # on time within the lateness
    assert out == [] and state.late_events == 0
    state, out = observe(state, _event(12_000), s)  # 12 000 ≥ 12 000: closes
    assert [(d.window_start, d.pages) for d in out] == [(0, 2)]


def test_failures_are_not_pages() -> None:
    s = ControllerSettings(controller="fixed")
    state, _ = observe(None, _event(1_000, status=-1), s)
    state, _ = observe(state, _event(2_000, status=503), s)
    state, _ = observe(state, _event(3_000, status=404), s)  # an answer: a visited page
    _, out = flush(state, s)
    assert out[0].pages == 1 and out[0].crawl_speed == 0.1  # 1 page / 10 s


def test_invalid_event_is_refused_and_skipped_in_a_log() -> None:
    bad = replace(_event(1_000), fetch_ms=math.nan)
    with pytest.raises(InvalidSpeedEvent):
        observe(None, bad, ControllerSettings())
    decisions = decisions_from_log([bad, _event(2_000)], ControllerSettings(controller="fixed"))
    assert [d.pages for d in decisions] == [1]


def test_merging_windows_is_order_independent() -> None:
    a = replace(_window(3, hosts=2), hosts=(5, 9))
    b = replace(_window(4, hosts=2), hosts=(1, 9))
    assert merge_windows(a, b) == merge_windows(b, a)
    assert merge_windows(a, b).hosts == (1, 5, 9)


# --- the statistical-hypothesis controller ----------------------------------------------


def _run(settings: ControllerSettings, pages: list[int]) -> list[tuple[int, int, int, bool, str]]:
    ctrl = initial_controller(settings)
    out = []
    for p in pages:
        ctrl, d = decide(ctrl, _window(p), "f", settings)
        out.append((d.e_cs_sign, d.threads_before, d.threads_after, d.learning, d.reason))
    return out


def test_hypothesis_learns_stops_and_the_critic_restarts() -> None:
    s = ControllerSettings()  # initial 4 threads, dead band 0.15, 2σ, L_ecs 6, 4 zeros
    steps = _run(s, [50, 80, 82, 80, 82, 80, 30, 20])
    # W1 5.0/s: nothing learned → probe, 4 → 5
    assert steps[0] == (-1, 4, 5, True, "probe: first window")
    # W2 8.0 vs last 5.0: E = −3, band max(0.75, 2·√0.5 = 1.41) → −1 → 6
    assert steps[1] == (-1, 5, 6, True, "learning: speed rose")
    # W3 8.2 vs 8.0: |E| = 0.2 < band → 0; W4, W5 likewise: three '0's
    assert [x[0] for x in steps[2:5]] == [0, 0, 0]
    assert all(x[2] == 6 and x[3] for x in steps[2:5])
    # W6: the fourth '0' → learning off, stable = mean(8.2, 8.0, 8.2, 8.0) = 8.1
    assert steps[5] == (0, 6, 6, False, "learned: stable speed stored")
    # W7 3.0 < min(0.7 × 8.1 = 5.67, 8.1 − 2·√0.81 = 6.3): the critic relearns, no change yet
    assert steps[6] == (0, 6, 6, True, "critic: speed fell, relearn")
    # W8 2.0: history (8.2, 8.0, 8.2, 8.0, 3.0) mean 7.08, ξ = √(20.848/5) = 2.042,
    # band = 2ξ = 4.084; E = 5.08 > band → +1 → one thread fewer
    assert steps[7] == (1, 6, 5, True, "learning: speed fell")


def test_hypothesis_stable_speed_value() -> None:
    s = ControllerSettings()
    ctrl = initial_controller(s)
    for p in [50, 80, 82, 80, 82, 80]:
        ctrl, _ = decide(ctrl, _window(p), "f", s)
    assert not ctrl.learning
    assert ctrl.stable_speed == pytest.approx(8.1)  # (8.2 + 8.0 + 8.2 + 8.0) / 4
    assert ctrl.l_ecs == ()  # the paper's step 2c: L_ecs emptied


def test_literal_variant_shrinks_the_pool() -> None:
    s = ControllerSettings(controller="hypothesis-literal")
    steps = _run(s, [50, 60, 50, 50, 50, 50, 50])
    # speeds 5, 6, 5, 5, …: ξ = 0, 0.5, 0.471, 0.433, 0.4, …; E = Σ earlier ξ − ξ_now:
    # 0 − 0 = 0 (keep), 0 − 0.5 < 0 (+1), 0.5 − 0.471 > 0 (−1), then ever more positive
    assert [x[2] for x in steps] == [4, 5, 4, 3, 2, 1, 1]
    assert steps[-1][4] == "literal eq. 8; min 1"


def test_aimd() -> None:
    s = ControllerSettings(controller="aimd", initial_threads=6)
    ctrl = initial_controller(s)
    ctrl, d = decide(ctrl, _window(30), "f", s)
    assert (d.threads_before, d.threads_after) == (6, 7)  # busy: +1
    ctrl, d = decide(ctrl, _window(30, failures=1), "f", s)
    assert d.threads_after == 3  # ⌊7 × 0.5⌋
    ctrl, d = decide(ctrl, _window(30, fetch_ms=6000.0), "f", s)
    assert d.threads_after == 1  # slow (6 s > 5 s): ⌊3 × 0.5⌋


def test_autothrottle_delay_rule() -> None:
    s = ControllerSettings(controller="autothrottle")  # target 8
    assert autothrottle_delay(5.0, 0.8, False, s) == pytest.approx(2.55)  # (5 + 0.8/8) / 2
    assert autothrottle_delay(5.0, 0.8, True, s) == 5.0  # no decrease after a failure
    assert autothrottle_delay(50.0, 400.0, False, s) == 50.0  # (50 + 50) / 2, under the max 60


def test_autothrottle_threads() -> None:
    s = ControllerSettings(controller="autothrottle")
    ctrl = initial_controller(s)
    ctrl, d = decide(ctrl, _window(30, fetch_ms=800.0), "f", s)
    # delay (5 + 0.1) / 2 = 2.55 s; floor latency 0.8 s: ⌈0.8 / 2.55⌉ = 1 thread
    assert d.threads_after == 1


def test_fixed() -> None:
    s = settings_for("fixed-3")
    assert [x[2] for x in _run(s, [10, 90, 5])] == [3, 3, 3]


# --- codec -------------------------------------------------------------------------------


def test_state_layout_is_the_released_one() -> None:
    """The bytes of a fresh fetcher's state, field by field (big-endian): a state
    directory written before the speed code moved to state/ must still read."""
    state = SpeedState("f", ControllerState(threads=4))
    fields = [
        "01",  # version
        "0001",  # fetcher id length
        "8000000000000000",  # watermark: none yet (−2**63)
        "0000000000000000",  # late events
        "66",  # "f"
        "00000004",  # threads
        "01",  # learning
        "00000000" + "00" * 16,  # history: n, mean, m2
        "00000000" + "00" * 16,  # overall: n, mean, m2
        "bff0000000000000",  # last speed −1.0
        "00" * 40,  # stable, peak, Σξ, delay, latency floor
        "0000000000000000",  # windows closed
        "00",  # L_ecs length
        "0000",  # open windows
    ]
    expected = bytes.fromhex("".join(fields))
    assert encode_speed_state(state) == expected
    assert decode_speed_state(expected) == state
    with pytest.raises(StateCodecError):  # threads are an int32
        encode_speed_state(SpeedState("f", ControllerState(threads=2**31)))


def test_state_codec_round_trip_and_errors() -> None:
    s = ControllerSettings(window_ms=10_000, slide_ms=5_000)
    state = None
    for t in range(0, 22_000, 700):
        state, _ = observe(state, _event(t, host=f"h{t % 3}.example"), s)
    assert state is not None and state.open_windows and state.controller.l_ecs
    data = encode_speed_state(state)
    assert decode_speed_state(data) == state
    with pytest.raises(StateCodecError):
        decode_speed_state(data[:-3])
    with pytest.raises(StateCodecError):
        decode_speed_state(data + b"\0")
    with pytest.raises(StateCodecError):
        decode_speed_state(b"\x09" + data[1:])  # unknown version


def test_add_host_keeps_the_smallest_distinct_hashes() -> None:
    """By hand, with the sample's bound: a hash inside the sample goes in its place and the
    largest falls out; one already there or larger than a full sample changes nothing."""
    full = tuple(range(0, 2 * HOST_SAMPLE, 2))  # 0, 2, …, 126: HOST_SAMPLE hashes
    assert add_host(full, 3) == (0, 2, 3, *range(4, 2 * HOST_SAMPLE - 2, 2))
    assert add_host(full, 4) is full
    assert add_host(full, 127) is full
    assert add_host((5,), 1) == (1, 5)
    assert add_host((), 9) == (9,)


@given(st.lists(st.integers(0, 300), max_size=200), st.integers(0, 300))
def test_add_host_is_merge_hosts_of_one(hashes: list[int], one: int) -> None:
    sample: tuple[int, ...] = ()
    for h in hashes:
        sample = merge_hosts(sample, (h,))
    assert add_host(sample, one) == merge_hosts(sample, (one,))
