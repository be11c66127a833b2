"""How a budget of revisits per unit of time is shared among pages, and when each is due.

Three rules over the rates `state/revisits.py` estimates, each giving revisit frequencies
that add up to the budget: in proportion to the change rate; the allocation of Cho &
Garcia-Molina 2003 (TODS) that maximises the mean freshness of the copies; and ours for
discovery, in proportion to the square root of the rate at which a page yields new
stories. Frequencies and rates are per millisecond here (any unit works if all agree).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

import numpy as np
from scipy.special import lambertw

K = TypeVar("K", bound=Hashable)

_BISECTIONS = 200


def _check(values: Mapping[K, float], budget: float) -> None:
    if not (math.isfinite(budget) and budget >= 0):
        raise ValueError(f"the revisit budget must be finite and >= 0, got {budget}")
    for key, value in values.items():
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"rate of {key!r} must be finite and >= 0, got {value}")


def _shares(weights: Mapping[K, float], budget: float) -> dict[K, float]:
    total = sum(weights.values())
    if total <= 0:
        return {k: 0.0 for k in weights}
    return {k: budget * w / total for k, w in weights.items()}


def proportional_frequencies(rates: Mapping[K, float], budget: float) -> dict[K, float]:
    """f_i = B · λ_i / Σ λ_j: a page changing twice as often is revisited twice as often
    (the "proportional" policy Cho & Garcia-Molina 2003 (TODS) compare against)."""
    _check(rates, budget)
    return _shares(rates, budget)


def square_root_frequencies(yields: Mapping[K, float], budget: float) -> dict[K, float]:
    """f_i = B · √y_i / Σ √y_j, for discovery (ours; new stories are found on a few
    sources that are revisited, as Lefortier et al. 2013 observed of news).

    New stories appear on page i at rate y_i; a page revisited every 1/f_i shows each one
    1/(2 f_i) after it appeared, on average. The mean delay Σ y_i / (2 f_i) / Σ y_i under
    Σ f_i = B is least where y_i / (2 f_i²) is the same for every page (Lagrange), that is
    f_i ∝ √y_i. Stories that leave a page before the next revisit are not modelled.
    """
    _check(yields, budget)
    return _shares({k: math.sqrt(y) for k, y in yields.items()}, budget)


def freshness(rate: float, frequency: float) -> float:
    """The time-averaged freshness of the copy of a page that changes as a Poisson process
    of rate λ and is revisited at the regular frequency f: F̄(λ, f) = (f/λ)(1 − e^(−λ/f))
    (Cho & Garcia-Molina 2003, TODS: the fixed-order policy). 1 for a page that never
    changes, 0 for one never revisited."""
    if rate <= 0:
        return 1.0
    if frequency <= 0:
        return 0.0
    r = rate / frequency
    return -math.expm1(-r) / r


def marginal_freshness(rate: float, frequency: float) -> float:
    """∂F̄/∂f = (1 − (1 + r)·e^(−r)) / λ with r = λ/f: what one more revisit per unit of
    time adds to the page's freshness. It falls from 1/λ at f → 0 to 0 as f grows."""
    if rate <= 0:
        return 0.0
    if frequency <= 0:
        return 1.0 / rate
    r = rate / frequency
    return (1.0 - (1.0 + r) * math.exp(-r)) / rate


def _frequencies_at(rates: np.ndarray, mu: float) -> np.ndarray:
    """The frequencies at which every page's marginal freshness is μ (0 where even the
    first revisit adds less): r with 1 − (1 + r)·e^(−r) = c = μλ, for 0 < c < 1, is
    r = −1 − W₋₁(−(1 − c)/e) (with u = −(1 + r) the equation is u·e^u = −(1 − c)/e, on
    the lower branch of Lambert's W since u ≤ −1); f = λ / r."""
    c = mu * rates
    revisited = c < 1.0
    out = np.zeros_like(rates)
    if revisited.any():
        cr = c[revisited]
        r = -1.0 - lambertw(-(1.0 - cr) / math.e, -1).real
        out[revisited] = rates[revisited] / np.maximum(r, 1e-300)
    return out


def optimal_freshness_frequencies(rates: Mapping[K, float], budget: float) -> dict[K, float]:
    """The frequencies that maximise Σ F̄(λ_i, f_i) under Σ f_i = B (Cho & Garcia-Molina
    2003, TODS, the optimal allocation of revisits under a budget).

    At the optimum every revisited page has the same marginal freshness μ (a Lagrange
    multiplier): 1 − (1 + r_i)·e^(−r_i) = μ·λ_i with r_i = λ_i / f_i. A page whose
    marginal freshness at f → 0, 1/λ_i, is not above μ gets no revisits: the optimal
    frequency rises with the change rate, then falls to 0 for pages that change too often
    to be kept fresh. μ is found by bisection so that the frequencies add up to B (they
    fall as μ grows). The paper's equation numbers were not checked here; the condition is
    derived again in the docstring of `marginal_freshness`.
    """
    _check(rates, budget)
    keys = [k for k, lam in rates.items() if lam > 0]
    out = {k: 0.0 for k in rates}
    if budget <= 0 or not keys:
        return out
    lam = np.array([rates[k] for k in keys], dtype=float)
    # for large f, r ≈ √(2μλ) and f ≈ √(λ / 2μ): start below the μ of that approximation
    lo = (float(np.sqrt(lam).sum()) / budget) ** 2 / 8.0
    while float(_frequencies_at(lam, lo).sum()) < budget:
        lo /= 4.0
    hi = 1.0 / float(lam.min())
    for _ in range(_BISECTIONS):
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi or hi / lo < 1.0 + 1e-13:
            break
        if float(_frequencies_at(lam, mid).sum()) > budget:
            lo = mid
        else:
            hi = mid
    out.update(zip(keys, (float(f) for f in _frequencies_at(lam, lo)), strict=True))
    return out


def due_ms(last_visit_ms: int, frequency: float) -> int | None:
    """When a page revisited at `frequency` (per ms) is next due; None when it gets no
    revisits. In a live frontier this is the revisit entry's `not_before`."""
    if frequency <= 0:
        return None
    return last_visit_ms + max(1, round(1.0 / frequency))
