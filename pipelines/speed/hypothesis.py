"""Nandy, Sarkar & Das 2012's statistical-hypothesis test, its rule table and its critic.

E_cs compares the present crawl speed with the learned one (the prose reading of eq. 8) or
sums earlier deviations (eq. 8 as printed); f(E_cs) of eq. 9 is its sign, with a dead band
wide enough for the counting noise of a window; the rule table turns f into a change of
threads; the critic tests a window against the stored stable speed.
"""

from __future__ import annotations

import math

from frontierflow.pipelines.speed.settings import ControllerSettings


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
    """E_cs as Nandy, Sarkar & Das 2012's prose defines it (after eq. 8): positive when the
    present speed is below the learned one, negative when above; the learned one is the mean
    speed at the current thread count (or the last window's speed just after a change)."""
    return reference - speed


def literal_e_cs(sum_earlier_xi: float, present_xi: float) -> float:
    """Nandy, Sarkar & Das 2012, eq. 8 as printed: Σ_{i<M} ξ_i − ξ_M. The sum grows with
    every window, so this is soon positive for good and f(E_cs) = +1 removes a thread every
    window."""
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
    """Nandy, Sarkar & Das 2012's rule table: E'_cs = 1 → P_T − 1; 0 → P_T; −1 → P_T + 1."""
    return -f
