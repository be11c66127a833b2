"""The thread-scaling controllers and `decide`, which closes one window of one fetcher.

Nandy, Sarkar & Das 2012's statistical-hypothesis learner (`hypothesis`: the prose reading of
eq. 8 with a dead band, the default), eq. 8 as printed (`hypothesis-literal`, a named
variant), and three baselines: fixed thread counts, AIMD, and a Scrapy-AutoThrottle-style
latency rule. Each is a pure step from the controller's state and a closed window to the
next state and a thread count; `decide` clamps the count to [min, max] and the politeness
cap and builds the `ScalingDecision`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from frontierflow.pipelines.speed.hypothesis import (
    critic_verdict,
    dead_band_width,
    literal_e_cs,
    prose_e_cs,
    sign_exact,
    sign_with_dead_band,
    threads_rule,
)
from frontierflow.pipelines.speed.settings import ControllerSettings
from frontierflow.pipelines.speed.windows import crawl_speed, mean_fetch_ms
from frontierflow.schemas.records import ScalingDecision
from frontierflow.state.speed import HOST_SAMPLE, ControllerState, SpeedWindow, Welford


def clamp_threads(
    threads: int, window: SpeedWindow, settings: ControllerSettings
) -> tuple[int, str]:
    """Threads within [min, max] and under the politeness cap, with the binding reason.

    The cap: a fetcher cannot keep more than max_per_host requests on each host it crawls
    busy without exceeding the host's allowance, so threads ≤ max_per_host × hosts seen in
    the window (when the host sample is full, the cap no longer binds)."""
    reason = ""
    if len(window.hosts) < HOST_SAMPLE and window.hosts:
        cap = settings.max_per_host * len(window.hosts)
        if threads > cap:
            threads, reason = cap, f"; politeness cap {cap}"
    if threads > settings.max_threads:
        threads, reason = settings.max_threads, f"; max {settings.max_threads}"
    if threads < settings.min_threads:
        threads, reason = settings.min_threads, f"; min {settings.min_threads}"
    return threads, reason


def initial_controller(settings: ControllerSettings) -> ControllerState:
    threads = settings.fixed_threads if settings.controller == "fixed" else settings.initial_threads
    return ControllerState(threads=threads, delay_s=settings.autothrottle_start_delay_s)


@dataclass(frozen=True, slots=True)
class _Step:
    """One controller step before clamping: the next state and the decision's fields."""

    state: ControllerState
    threads: int
    e_cs: float
    sign: int
    reason: str


def decide(
    ctrl: ControllerState, window: SpeedWindow, fetcher_id: str, settings: ControllerSettings
) -> tuple[ControllerState, ScalingDecision]:
    """Close `window`: the controller's next state and the decision to publish."""
    speed = crawl_speed(window.pages, settings.window_ms)
    step = _STEPS[settings.controller](ctrl, window, speed, settings)
    threads, why = clamp_threads(step.threads, window, settings)
    state = replace(
        step.state,
        threads=threads,
        overall=step.state.overall
        if settings.controller == "hypothesis-literal"
        else ctrl.overall.add(speed),
        last_speed=speed,
        windows=ctrl.windows + 1,
    )
    stats = state.history if settings.controller == "hypothesis" else state.overall
    decision = ScalingDecision(
        fetcher_id=fetcher_id,
        window_start=window.start_ms,
        window_end=window.end_ms,
        pages=window.pages,
        crawl_speed=speed,
        speed_mean=stats.mean,
        speed_stddev=stats.stddev,
        e_cs=step.e_cs,
        e_cs_sign=step.sign,
        threads_before=ctrl.threads,
        threads_after=threads,
        learning=state.learning,
        reason=step.reason + why,
    )
    return state, decision


def _hypothesis(
    ctrl: ControllerState, window: SpeedWindow, speed: float, settings: ControllerSettings
) -> _Step:
    """The prose reading of Nandy, Sarkar & Das 2012 (default), one window.

    Learning on: compare the speed with the learned one (prose E_cs), f with a dead band,
    the rule table, append f to L_ecs; enough '0's switch learning off and store the stable
    speed. Learning off: threads stay; the critic turns learning back on when the speed
    leaves [critic_low, critic_high] × stable speed."""
    if ctrl.learning:
        return _learn(ctrl, speed, settings)
    return _critic(ctrl, speed, settings)


def _reference(ctrl: ControllerState) -> tuple[float, float] | None:
    """The learned speed and its deviation to test the present window against: the history
    at the current thread count, or just after a change the window that caused it (so the
    first test after a change asks "did the change help?"); None before any window."""
    if ctrl.history.n:
        return ctrl.history.mean, ctrl.history.stddev
    if ctrl.last_speed >= 0.0:
        return ctrl.last_speed, 0.0
    return None


def _learn(ctrl: ControllerState, speed: float, settings: ControllerSettings) -> _Step:
    ref = _reference(ctrl)
    if ref is None:
        # Nothing learned yet and nothing changed: a learner that never changes anything
        # learns nothing, so the first step probes with one more thread (the −1 branch).
        return _Step(replace(ctrl, l_ecs=(-1,)), ctrl.threads + 1, 0.0, -1, "probe: first window")
    reference, xi = ref
    e_cs = prose_e_cs(reference, speed)
    f = sign_with_dead_band(e_cs, dead_band_width(reference, xi, settings))
    l_ecs = (*ctrl.l_ecs, f)[-settings.learning_list :]
    history = ctrl.history.add(speed)
    if f != 0:
        # A change starts a new hypothesis at the new thread count.
        state = replace(ctrl, l_ecs=l_ecs, history=Welford())
        why = "speed fell" if f > 0 else "speed rose"
        return _Step(state, ctrl.threads + threads_rule(f), e_cs, f, f"learning: {why}")
    if l_ecs.count(0) < settings.zeros_to_stop:
        return _Step(
            replace(ctrl, l_ecs=l_ecs, history=history), ctrl.threads, e_cs, 0, "learning: stable"
        )
    return _stop_learning(ctrl, history, e_cs, settings)


def _stop_learning(
    ctrl: ControllerState, history: Welford, e_cs: float, settings: ControllerSettings
) -> _Step:
    """Enough '0's: store the stable speed and switch learning off (the paper's step 2) —
    unless the speed got trapped well below an earlier peak (the paper's "after a certain
    high peak … stable on some lower speed"): then the critic probes once with one more
    thread and accepts the lower level as the new peak, so it probes only once per drop."""
    stable = history.mean
    if ctrl.peak_speed > 0.0 and critic_verdict(ctrl.peak_speed, stable, settings) > 0:
        state = replace(ctrl, l_ecs=(), history=Welford(), peak_speed=stable)
        return _Step(state, ctrl.threads + 1, e_cs, 0, "critic: trapped below peak, probe")
    state = replace(
        ctrl,
        learning=False,
        l_ecs=(),
        history=history,
        stable_speed=stable,
        peak_speed=max(ctrl.peak_speed, stable),
    )
    return _Step(state, ctrl.threads, e_cs, 0, "learned: stable speed stored")


def _critic(ctrl: ControllerState, speed: float, settings: ControllerSettings) -> _Step:
    """Learning off: keep the threads; turn learning on when the speed leaves the band
    around the stored stable speed (the paper's low threshold; the high one is ours, so a
    crawl notices when more bandwidth became available)."""
    stable = ctrl.stable_speed
    e_cs = prose_e_cs(stable, speed)
    history = ctrl.history.add(speed)
    verdict = critic_verdict(stable, speed, settings)
    if verdict == 0:
        return _Step(replace(ctrl, history=history), ctrl.threads, e_cs, 0, "stable")
    why = "fell" if verdict > 0 else "rose"
    state = replace(ctrl, learning=True, history=history)
    return _Step(state, ctrl.threads, e_cs, 0, f"critic: speed {why}, relearn")


def _hypothesis_literal(
    ctrl: ControllerState, window: SpeedWindow, speed: float, settings: ControllerSettings
) -> _Step:
    """Nandy, Sarkar & Das 2012's controller with eq. 8 and eq. 9 exactly as printed (the
    named variant).

    ξ_M is eq. 7 over all speeds so far; E_cs = Σ of every earlier ξ − ξ_M; f is the exact
    sign. Learning list, flag and critic as in the default."""
    overall = ctrl.overall.add(speed)
    xi = overall.stddev
    e_cs = literal_e_cs(ctrl.sum_xi, xi)
    f = sign_exact(e_cs)
    base = replace(ctrl, overall=overall, sum_xi=ctrl.sum_xi + xi)
    if not ctrl.learning:
        if critic_verdict(ctrl.stable_speed, speed, settings) > 0:
            return _Step(
                replace(base, learning=True), ctrl.threads, e_cs, f, "critic: speed fell, relearn"
            )
        return _Step(base, ctrl.threads, e_cs, f, "stable")
    l_ecs = (*ctrl.l_ecs, f)[-settings.learning_list :]
    if l_ecs.count(0) >= settings.zeros_to_stop:
        state = replace(base, learning=False, l_ecs=(), stable_speed=speed)
        return _Step(state, ctrl.threads, e_cs, f, "learned: stable speed stored")
    return _Step(
        replace(base, l_ecs=l_ecs), ctrl.threads + threads_rule(f), e_cs, f, "literal eq. 8"
    )


def _fixed(
    ctrl: ControllerState, window: SpeedWindow, speed: float, settings: ControllerSettings
) -> _Step:
    """Baseline: the same thread count in every window."""
    return _Step(replace(ctrl, learning=False), settings.fixed_threads, 0.0, 0, "fixed")


def _aimd(
    ctrl: ControllerState, window: SpeedWindow, speed: float, settings: ControllerSettings
) -> _Step:
    """Baseline, TCP's rule: cut by a factor after a failed or slow fetch (the network or a
    server is saturated); otherwise, while there was work, add one thread."""
    if window.failures or mean_fetch_ms(window) > settings.aimd_slow_ms:
        threads = max(settings.min_threads, math.floor(ctrl.threads * settings.aimd_factor))
        return _Step(replace(ctrl, learning=False), threads, 0.0, 1, "aimd: failed or slow, cut")
    if window.events:
        return _Step(replace(ctrl, learning=False), ctrl.threads + 1, 0.0, -1, "aimd: busy, add")
    return _Step(replace(ctrl, learning=False), ctrl.threads, 0.0, 0, "aimd: idle")


def autothrottle_delay(
    delay_s: float, latency_s: float, failed: bool, settings: ControllerSettings
) -> float:
    """Scrapy AutoThrottle's delay update: aim at latency / target concurrency, move half
    way there; never lower the delay after failures (their latency is not the server's);
    clamp to [0, max delay]."""
    target = latency_s / settings.autothrottle_target
    new = (delay_s + target) / 2.0
    if failed and new < delay_s:
        new = delay_s
    return min(max(new, 0.0), settings.autothrottle_max_delay_s)


def _autothrottle(
    ctrl: ControllerState, window: SpeedWindow, speed: float, settings: ControllerSettings
) -> _Step:
    """Baseline after Scrapy's AutoThrottle, with threads as the knob: a delay d between
    requests lets a thread pool sustain rate 1/d; at the unloaded latency ℓ₀ that needs
    ℓ₀/d threads (Little's law). At equilibrium d = ℓ/target, so threads = target·ℓ₀/ℓ:
    the target concurrency when the link is idle, fewer as latency grows."""
    if not window.events:
        return _Step(replace(ctrl, learning=False), ctrl.threads, 0.0, 0, "autothrottle: idle")
    latency_ms = mean_fetch_ms(window)
    floor_ms = (
        latency_ms if ctrl.latency_floor_ms <= 0.0 else min(ctrl.latency_floor_ms, latency_ms)
    )
    delay = autothrottle_delay(ctrl.delay_s, latency_ms / 1000.0, window.failures > 0, settings)
    threads = math.ceil(floor_ms / 1000.0 / delay) if delay > 0.0 else settings.max_threads
    state = replace(ctrl, learning=False, delay_s=delay, latency_floor_ms=floor_ms)
    return _Step(state, threads, 0.0, 0, f"autothrottle: delay {delay:.3f}s")


_STEPS = {
    "hypothesis": _hypothesis,
    "hypothesis-literal": _hypothesis_literal,
    "aimd": _aimd,
    "autothrottle": _autothrottle,
    "fixed": _fixed,
}
