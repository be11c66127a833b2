"""Settings of the crawl-speed windows and thread-scaling controllers (Nandy, Sarkar & Das
2012's statistical-hypothesis controller and the baselines).

One frozen dataclass holds the window length and slide, the allowed lateness and every
controller's constants; it refuses settings that cannot work when it is built (at
start-up, never mid-stream). `settings_for` turns a controller named on the command line
into settings.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

CONTROLLERS = ("hypothesis", "hypothesis-literal", "aimd", "autothrottle", "fixed")


class SpeedSettingsError(ValueError):
    """Controller settings that cannot work; raised at start-up, never mid-stream."""


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """Windows and controller constants, validated once when built.

    Values from Nandy, Sarkar & Das 2012: only the rule table (+1 → one thread fewer, −1 →
    one more, 0 → keep), the learning list and flag, and the critic's existence. Every
    number below is ours; `docs/results/speed.md` says how they were calibrated.
    """

    controller: str = "hypothesis"
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


DEFAULT_SPEED_CONTROLLER = "hypothesis"
"""The controller a job runs when its command names none (`settings_for` reads the name)."""


def settings_for(name: str, **overrides: object) -> ControllerSettings:
    """Settings of a controller named on the command line: `hypothesis`, `hypothesis-literal`,
    `aimd`, `autothrottle` or `fixed-N`; unknown names raise `SpeedSettingsError`."""
    if name.startswith("fixed-"):
        try:
            threads = int(name.removeprefix("fixed-"))
        except ValueError as exc:
            raise SpeedSettingsError(f"fixed-N needs an integer N, got {name!r}") from exc
        return ControllerSettings(controller="fixed", fixed_threads=threads, **overrides)  # type: ignore[arg-type]
    return ControllerSettings(controller=name, **overrides)  # type: ignore[arg-type]
