"""Crawl-speed windows per fetcher and the thread-scaling controllers of seed 003.

A pure operator keyed by fetcher: `observe(state, event, settings)` folds one FetchEvent
into event-time windows and, when the fetcher's event time passes a window's end (plus the
allowed lateness), turns the window into a `ScalingDecision` through the configured
controller: seed 003's statistical-hypothesis learner (the prose reading of eq. 8 with a
dead band, the default), the literal printed eq. 8 (a named variant), fixed thread counts,
AIMD, and a Scrapy-AutoThrottle-style latency rule. Time comes only from `fetched_at`;
state is an explicit record with a struct-based byte codec (no pickle).

Late events (the stated rule): an event counts in every one of its windows that is still
open when it arrives. A window [start, end) closes as soon as the fetcher's watermark (the
largest `fetched_at` seen before) reaches end + allowed lateness; an event whose window has
closed is not counted in it (a published decision is never revised), and an event late for
all of its windows only increments `late_events`. Windows without events give no decision.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace

from frontierflow.schemas.records import FetchEvent, ScalingDecision

CONTROLLERS = ("seed003", "seed003-literal", "aimd", "autothrottle", "fixed")
HOST_SAMPLE = 64
"""Distinct hosts remembered per window (the smallest hashes, so the sample does not depend
on arrival order). With this many hosts the politeness cap no longer binds below 64 threads."""

_NO_WATERMARK = -(2**63)


class SpeedSettingsError(ValueError):
    """Controller settings that cannot work; raised at start-up, never mid-stream."""


class InvalidSpeedEvent(ValueError):
    """A FetchEvent the speed statistics cannot use (negative time, NaN latency, …)."""


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Windows and controller constants, validated once when built.

    Values from seed 003: only the rule table (+1 → one thread fewer, −1 → one more, 0 →
    keep), the learning list and flag, and the critic's existence. Every number below is
    ours; `docs/RESULTS.md` (speed section) says how they were calibrated.
    """

    controller: str = "seed003"
    window_ms: int = 10_000
    slide_ms: int | None = None  # None: fixed (tumbling) windows; else sliding windows
    allowed_lateness_ms: int = 0
    min_threads: int = 1
    max_threads: int = 32
    initial_threads: int = 4  # a common fetcher default; calibrated, see RESULTS
    max_per_host: int = 2  # politeness: concurrent requests one host may receive
    fixed_threads: int = 4
    dead_band: float = 0.15  # relative change of speed treated as "no change" (E_cs' = 0)
    dead_band_sigmas: float = 2.0  # …or this many standard deviations, if wider
    learning_list: int = 6  # n: length of L_ecs
    zeros_to_stop: int = 4  # '0's in L_ecs that switch learning off
    critic_low: float = 0.7  # critic: relearn when speed < this × stable speed
    critic_high: float = 1.3  # ours: relearn when speed > this × stable speed (inf: never)
    aimd_factor: float = 0.5
    aimd_slow_ms: float = 5_000.0
    autothrottle_target: float = 8.0
    autothrottle_start_delay_s: float = 5.0
    autothrottle_max_delay_s: float = 60.0

    def __post_init__(self) -> None:
        for problem in _settings_problems(self):
            raise SpeedSettingsError(problem)

    @property
    def slide(self) -> int:
        """The slide of the windows in ms (= the length for fixed windows)."""
        return self.window_ms if self.slide_ms is None else self.slide_ms


def _settings_problems(s: ControllerSettings) -> Iterator[str]:
    """Every reason `s` cannot run; each is refused at start-up (Scrapy's habit)."""
    if s.controller not in CONTROLLERS:
        yield f"controller must be one of {', '.join(CONTROLLERS)}, got {s.controller!r}"
    if not 0 < s.window_ms <= 86_400_000:
        yield f"window_ms must be in (0, 1 day], got {s.window_ms}"
    if s.slide_ms is not None and not (
        0 < s.slide_ms <= s.window_ms and s.window_ms % s.slide_ms == 0
    ):
        yield f"slide_ms must divide window_ms ({s.window_ms}), got {s.slide_ms}"
    if s.allowed_lateness_ms < 0:
        yield f"allowed_lateness_ms must be >= 0, got {s.allowed_lateness_ms}"
    if not 1 <= s.min_threads <= s.initial_threads <= s.max_threads <= 4096:
        yield (
            "need 1 <= min_threads <= initial_threads <= max_threads <= 4096, got "
            f"{s.min_threads}, {s.initial_threads}, {s.max_threads}"
        )
    if not 1 <= s.fixed_threads <= 4096:
        yield f"fixed_threads must be in [1, 4096], got {s.fixed_threads}"
    if s.max_per_host < 1:
        yield f"max_per_host must be >= 1, got {s.max_per_host}"
    floats = {
        "dead_band": (s.dead_band, 0.0, 1.0),
        "critic_low": (s.critic_low, 0.0, 1.0),
        "aimd_factor": (s.aimd_factor, 0.0, 1.0),
    }
    for name, (value, lo, hi) in floats.items():
        if not lo < value < hi:  # also refuses NaN
            yield f"{name} must be in ({lo}, {hi}), got {value}"
    if not (s.critic_high > 1.0):
        yield f"critic_high must be > 1 (inf disables it), got {s.critic_high}"
    if not (0.0 <= s.dead_band_sigmas < math.inf):
        yield f"dead_band_sigmas must be finite and >= 0, got {s.dead_band_sigmas}"
    if not 1 <= s.zeros_to_stop <= s.learning_list <= 255:
        yield (
            "need 1 <= zeros_to_stop <= learning_list <= 255, got "
            f"{s.zeros_to_stop}, {s.learning_list}"
        )
    for name, value in (
        ("aimd_slow_ms", s.aimd_slow_ms),
        ("autothrottle_target", s.autothrottle_target),
        ("autothrottle_start_delay_s", s.autothrottle_start_delay_s),
        ("autothrottle_max_delay_s", s.autothrottle_max_delay_s),
    ):
        if not 0.0 < value < math.inf:
            yield f"{name} must be finite and > 0, got {value}"


def settings_for(name: str, **overrides: object) -> ControllerSettings:
    """Settings of a controller named on the command line: `seed003`, `seed003-literal`,
    `aimd`, `autothrottle` or `fixed-N`; unknown names raise `SpeedSettingsError`."""
    if name.startswith("fixed-"):
        try:
            threads = int(name.removeprefix("fixed-"))
        except ValueError as exc:
            raise SpeedSettingsError(f"fixed-N needs an integer N, got {name!r}") from exc
        return ControllerSettings(controller="fixed", fixed_threads=threads, **overrides)  # type: ignore[arg-type]
    return ControllerSettings(controller=name, **overrides)  # type: ignore[arg-type]


# --- windows -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpeedWindow:
    """What one fetcher did in the event-time window [start_ms, end_ms).

    Sums only (integers), so windows combine in any order to the same value: Beam's
    CombineFn and the embedded fold agree bit for bit.
    """

    start_ms: int
    end_ms: int
    pages: int = 0  # events with an HTTP answer that is not a back-off (eq. 1's V_i)
    failures: int = 0  # transport errors (status <= 0) and 429/503 back-off answers
    bytes: int = 0
    fetch_us: int = 0  # sum of fetch_ms of all events, in integer microseconds
    events: int = 0
    hosts: tuple[int, ...] = ()  # sorted smallest HOST_SAMPLE host hashes


def is_failure(status: int) -> bool:
    """A fetch that tells the fetcher to slow down: no answer, or 429/503 (AIMD's signal)."""
    return status <= 0 or status in (429, 503)


def host_hash(host: str) -> int:
    """A stable 64-bit hash of a host name (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.blake2b(host.encode(), digest_size=8).digest(), "big")


def merge_hosts(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The smallest HOST_SAMPLE distinct hashes of both samples (order-independent)."""
    if not b or set(b) <= set(a):
        return a
    return tuple(sorted(set(a) | set(b))[:HOST_SAMPLE])


def add_event(window: SpeedWindow, event: FetchEvent) -> SpeedWindow:
    """The window with one more event counted."""
    failed = is_failure(event.status)
    return SpeedWindow(
        window.start_ms,
        window.end_ms,
        window.pages + (0 if failed else 1),
        window.failures + (1 if failed else 0),
        window.bytes + event.bytes,
        window.fetch_us + round(event.fetch_ms * 1000.0),
        window.events + 1,
        merge_hosts(window.hosts, (host_hash(event.host),)),
    )


def merge_windows(a: SpeedWindow, b: SpeedWindow) -> SpeedWindow:
    """Two partial sums of the same window (Beam's merge_accumulators)."""
    return SpeedWindow(
        a.start_ms,
        a.end_ms,
        a.pages + b.pages,
        a.failures + b.failures,
        a.bytes + b.bytes,
        a.fetch_us + b.fetch_us,
        a.events + b.events,
        merge_hosts(a.hosts, b.hosts),
    )


def window_starts(fetched_at: int, settings: ControllerSettings) -> list[int]:
    """Starts of every window holding `fetched_at`, oldest first (Beam's assignment with
    offset 0: start = t − t mod slide, and the L/slide − 1 windows before it)."""
    slide = settings.slide
    last = fetched_at - fetched_at % slide
    count = settings.window_ms // slide
    return [last - k * slide for k in range(count - 1, -1, -1)]


def crawl_speed(pages: int, window_ms: int) -> float:
    """Seed 003 eq. 1: C_s = visited pages / crawling time, here the window's length."""
    return pages / (window_ms / 1000.0)


def mean_fetch_ms(window: SpeedWindow) -> float:
    """Mean latency of the window's fetches in ms (0 for an empty window)."""
    return window.fetch_us / 1000.0 / window.events if window.events else 0.0


# --- statistics ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Welford:
    """Running mean and squared deviation of crawl speeds (seed 003 eqs. 2 and 7).

    Welford's update, not eq. 6–7's M·Σc² − (Σc)², which cancels catastrophically when the
    speeds are large and close together (DESIGN §5.4)."""

    n: int = 0
    mean: float = 0.0
    m2: float = 0.0

    def add(self, x: float) -> Welford:
        n = self.n + 1
        delta = x - self.mean
        mean = self.mean + delta / n
        return Welford(n, mean, self.m2 + delta * (x - mean))

    @property
    def stddev(self) -> float:
        """ξ_cs of eq. 7: the population deviation (divide by M, as the paper does)."""
        return math.sqrt(max(self.m2, 0.0) / self.n) if self.n else 0.0


def sign_with_dead_band(e_cs: float, band: float) -> int:
    """f(E_cs) of eq. 9 with a dead band: floats are never exactly 0.0, so a change smaller
    than `band` counts as "stable" (the '0' whose appearance the paper watches for)."""
    if e_cs > band:
        return 1
    if e_cs < -band:
        return -1
    return 0


def sign_exact(e_cs: float) -> int:
    """f(E_cs) of eq. 9 as printed: exactly 0.0 only for exactly equal values."""
    return (e_cs > 0.0) - (e_cs < 0.0)


def prose_e_cs(reference: float, speed: float) -> float:
    """E_cs as seed 003's prose defines it (after eq. 8): positive when the present speed
    is below the learned one, negative when above; the learned one is the mean speed at
    the current thread count (or the last window's speed just after a change)."""
    return reference - speed


def literal_e_cs(sum_earlier_xi: float, present_xi: float) -> float:
    """Seed 003 eq. 8 as printed: Σ_{i<M} ξ_i − ξ_M. The sum grows with every window, so
    this is soon positive for good and f(E_cs) = +1 removes a thread every window."""
    return sum_earlier_xi - present_xi


def dead_band_width(reference: float, xi: float, settings: ControllerSettings) -> float:
    """Half-width of the "no change" band, the hypothesis test: reject "same speed as
    learned" only outside it. The widest of a relative share of the learned speed, a number
    of learned deviations ξ, and the same number of counting-noise deviations: with pages
    arriving as a Poisson process at rate ρ, a window of T seconds measures C_s with
    variance ρ/T, so a slow crawl needs a wide band (ours, not the paper's)."""
    counting = counting_deviation(reference, settings)
    return max(settings.dead_band * reference, settings.dead_band_sigmas * max(xi, counting))


def counting_deviation(speed: float, settings: ControllerSettings) -> float:
    """Standard deviation of C_s measured over one window when pages arrive as a Poisson
    process at `speed` pages/s: sqrt(speed / T) for a window of T seconds."""
    return math.sqrt(max(speed, 0.0) / (settings.window_ms / 1000.0))


def critic_verdict(stable: float, speed: float, settings: ControllerSettings) -> int:
    """The critic's test of a window against the stored stable speed: +1 when the speed
    fell below critic_low × stable, −1 when it rose above critic_high × stable, else 0; a
    change within the counting noise (dead_band_sigmas deviations) never counts."""
    noise = settings.dead_band_sigmas * counting_deviation(stable, settings)
    if speed < min(settings.critic_low * stable, stable - noise):
        return 1
    if speed > max(settings.critic_high * stable, stable + noise):
        return -1
    return 0


def threads_rule(f: int) -> int:
    """Seed 003's rule table: E'_cs = 1 → P_T − 1; 0 → P_T; −1 → P_T + 1."""
    return -f


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


# --- controller state ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerState:
    """What a fetcher's controller remembers between windows."""

    threads: int
    learning: bool = True
    history: Welford = field(default_factory=Welford)  # speeds at the current thread count
    overall: Welford = field(default_factory=Welford)  # all speeds (the literal variant's M)
    last_speed: float = -1.0  # speed of the last closed window, −1 before the first
    l_ecs: tuple[int, ...] = ()  # L_ecs: the latest f(E_cs) values while learning
    stable_speed: float = 0.0  # stored when learning stops (the paper's local DB)
    peak_speed: float = 0.0  # the highest stable speed stored, for the critic's recovery
    sum_xi: float = 0.0  # Σ of earlier ξ (literal eq. 8)
    delay_s: float = 0.0  # AutoThrottle's download delay
    latency_floor_ms: float = 0.0  # AutoThrottle: lowest window mean latency seen
    windows: int = 0


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
        if settings.controller == "seed003-literal"
        else ctrl.overall.add(speed),
        last_speed=speed,
        windows=ctrl.windows + 1,
    )
    stats = state.history if settings.controller == "seed003" else state.overall
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


def _seed003(
    ctrl: ControllerState, window: SpeedWindow, speed: float, settings: ControllerSettings
) -> _Step:
    """The prose reading of seed 003 (default), one window.

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


def _seed003_literal(
    ctrl: ControllerState, window: SpeedWindow, speed: float, settings: ControllerSettings
) -> _Step:
    """Seed 003 with eq. 8 and eq. 9 exactly as printed (the named variant).

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
    "seed003": _seed003,
    "seed003-literal": _seed003_literal,
    "aimd": _aimd,
    "autothrottle": _autothrottle,
    "fixed": _fixed,
}


# --- the operator ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpeedState:
    """One fetcher's state: its watermark, open windows and controller."""

    fetcher_id: str
    controller: ControllerState
    watermark: int = _NO_WATERMARK
    open_windows: tuple[SpeedWindow, ...] = ()  # sorted by start
    late_events: int = 0


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
    return watermark != _NO_WATERMARK and watermark >= window_end + settings.allowed_lateness_ms


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
    for start in window_starts(event.fetched_at, settings):
        end = start + settings.window_ms
        if is_late(state.watermark, end, settings):
            continue
        counted = True
        windows[start] = add_event(windows.get(start) or SpeedWindow(start, end), event)
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
    """End of input: every open window closes (Beam's final watermark does the same)."""
    ready = sorted(state.open_windows, key=lambda w: w.end_ms)
    return _close(replace(state, open_windows=()), ready, settings)


def decisions_from_log(
    events: Iterable[FetchEvent], settings: ControllerSettings
) -> list[ScalingDecision]:
    """The reference run: `observe` keyed by fetcher over a log in order, then `flush`.
    Events `speed_event_problem` refuses are skipped (the engine dead-letters them)."""
    states: dict[str, SpeedState] = {}
    out: list[ScalingDecision] = []
    for event in events:
        if speed_event_problem(event) is not None:
            continue
        states[event.fetcher_id], decisions = observe(states.get(event.fetcher_id), event, settings)
        out += decisions
    for fetcher_id in sorted(states):
        _, decisions = flush(states[fetcher_id], settings)
        out += decisions
    return out


# --- codec -----------------------------------------------------------------------------

_VERSION = 1
_HEAD = struct.Struct(">BHqQ")  # version, fetcher id length, watermark, late events
_CTRL = struct.Struct(">i?" + "Idd" * 2 + "ddddddQ")
_WINDOW = struct.Struct(">qqIIQQIH")
_U8 = struct.Struct(">B")
_U16 = struct.Struct(">H")


class SpeedStateCodecError(ValueError):
    """Bytes that are not an encoded SpeedState."""


def encode_speed_state(s: SpeedState) -> bytes:
    """Big-endian fixed layout: head, fetcher id, controller, L_ecs, windows with hosts."""
    fid = s.fetcher_id.encode()
    c = s.controller
    parts = [
        _HEAD.pack(_VERSION, len(fid), s.watermark, s.late_events),
        fid,
        _CTRL.pack(
            c.threads,
            c.learning,
            c.history.n,
            c.history.mean,
            c.history.m2,
            c.overall.n,
            c.overall.mean,
            c.overall.m2,
            c.last_speed,
            c.stable_speed,
            c.peak_speed,
            c.sum_xi,
            c.delay_s,
            c.latency_floor_ms,
            c.windows,
        ),
        _U8.pack(len(c.l_ecs)),
        struct.pack(f">{len(c.l_ecs)}b", *c.l_ecs),
        _U16.pack(len(s.open_windows)),
    ]
    for w in s.open_windows:
        parts.append(
            _WINDOW.pack(
                w.start_ms,
                w.end_ms,
                w.pages,
                w.failures,
                w.bytes,
                w.fetch_us,
                w.events,
                len(w.hosts),
            )
        )
        parts.append(struct.pack(f">{len(w.hosts)}Q", *w.hosts))
    return b"".join(parts)


def decode_speed_state(b: bytes) -> SpeedState:
    """The inverse of `encode_speed_state`; wrong bytes raise `SpeedStateCodecError`."""
    try:
        return _decode(memoryview(b))
    except (struct.error, UnicodeDecodeError) as exc:
        raise SpeedStateCodecError(f"not an encoded SpeedState: {exc}") from exc


def _decode(b: memoryview) -> SpeedState:
    version, fid_len, watermark, late = _HEAD.unpack_from(b, 0)
    if version != _VERSION:
        raise SpeedStateCodecError(f"unknown SpeedState version {version}")
    pos = _HEAD.size
    fetcher_id = bytes(b[pos : pos + fid_len]).decode()
    pos += fid_len
    v = _CTRL.unpack_from(b, pos)
    pos += _CTRL.size
    (n_l,) = _U8.unpack_from(b, pos)
    pos += 1
    l_ecs = struct.unpack_from(f">{n_l}b", b, pos)
    pos += n_l
    (n_w,) = _U16.unpack_from(b, pos)
    pos += 2
    windows = []
    for _ in range(n_w):
        start, end, pages, failures, nbytes, fetch_us, events, n_h = _WINDOW.unpack_from(b, pos)
        pos += _WINDOW.size
        hosts = struct.unpack_from(f">{n_h}Q", b, pos)
        pos += 8 * n_h
        windows.append(SpeedWindow(start, end, pages, failures, nbytes, fetch_us, events, hosts))
    if pos != len(b):
        raise SpeedStateCodecError(f"{len(b) - pos} trailing bytes after a SpeedState")
    ctrl = ControllerState(
        threads=v[0],
        learning=v[1],
        history=Welford(v[2], v[3], v[4]),
        overall=Welford(v[5], v[6], v[7]),
        last_speed=v[8],
        l_ecs=tuple(l_ecs),
        stable_speed=v[9],
        peak_speed=v[10],
        sum_xi=v[11],
        delay_s=v[12],
        latency_floor_ms=v[13],
        windows=v[14],
    )
    return SpeedState(fetcher_id, ctrl, watermark, tuple(windows), late)
