"""How a budget of revisits per unit of time is shared among pages, and when each is due.

Rules over the rates `state/revisits.py` and `state/revisit_lifetimes.py` estimate, each
giving revisit frequencies that add up to the budget: in proportion to the change rate; the
allocation of Cho & Garcia-Molina 2003 (TODS) that maximises the mean freshness of the
copies (weighted or not); and two of ours for discovery, in proportion to the square root of
the rate at which a page yields new stories, or maximising the stories found given how long
each page keeps them listed. Frequencies and rates are per millisecond here (any unit works
if all agree).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
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


def _frequencies_at(rates: np.ndarray, weights: np.ndarray, mu: float) -> np.ndarray:
    """The frequencies at which every page's weighted marginal freshness w·∂F̄/∂f is μ (0
    where even the first revisit adds less): r with 1 − (1 + r)·e^(−r) = c = μλ/w, for
    0 < c < 1, is r = −1 − W₋₁(−(1 − c)/e) (with u = −(1 + r) the equation is
    u·e^u = −(1 − c)/e, on the lower branch of Lambert's W since u ≤ −1); f = λ / r."""
    c = mu * rates / weights
    revisited = c < 1.0
    out = np.zeros_like(rates)
    if revisited.any():
        cr = c[revisited]
        r = -1.0 - lambertw(-(1.0 - cr) / math.e, -1).real
        out[revisited] = rates[revisited] / np.maximum(r, 1e-300)
    return out


def optimal_freshness_frequencies(rates: Mapping[K, float], budget: float) -> dict[K, float]:
    """The frequencies that maximise Σ F̄(λ_i, f_i) under Σ f_i = B (Cho & Garcia-Molina
    2003, TODS, the optimal allocation of revisits under a budget): every page weighs 1 in
    `weighted_freshness_frequencies`."""
    return weighted_freshness_frequencies(rates, dict.fromkeys(rates, 1.0), budget)


def weighted_freshness_frequencies(
    rates: Mapping[K, float], weights: Mapping[K, float], budget: float
) -> dict[K, float]:
    """The frequencies that maximise Σ w_i·F̄(λ_i, f_i) under Σ f_i = B (Cho & Garcia-Molina
    2003, TODS; their weighted freshness, each page by its importance w_i).

    At the optimum every revisited page has the same weighted marginal freshness μ (a
    Lagrange multiplier): w_i·(1 − (1 + r_i)·e^(−r_i))/λ_i = μ with r_i = λ_i / f_i. A page
    whose weighted marginal freshness at f → 0, w_i/λ_i, is not above μ gets no revisits:
    the optimal frequency rises with the change rate, then falls to 0 for pages that change
    too often to be kept fresh. μ is found by bisection so that the frequencies add up to B
    (they fall as μ grows). The paper's equation numbers were not checked here; the
    condition is derived again in the docstring of `marginal_freshness`. A page of weight
    0 gets none.
    """
    _check(rates, budget)
    _check(weights, budget)
    keys = [k for k, lam in rates.items() if lam > 0 and weights.get(k, 0.0) > 0]
    out = {k: 0.0 for k in rates}
    if budget <= 0 or not keys:
        return out
    lam = np.array([rates[k] for k in keys], dtype=float)
    w = np.array([weights[k] for k in keys], dtype=float)
    # for large f, r ≈ √(2μλ/w) and f ≈ √(wλ / 2μ): start below the μ of that approximation
    lo = (float(np.sqrt(w * lam).sum()) / budget) ** 2 / 8.0
    while float(_frequencies_at(lam, w, lo).sum()) < budget:
        lo /= 4.0
    hi = float((w / lam).max())
    for _ in range(_BISECTIONS):
        mid = math.sqrt(lo * hi)
        if not lo < mid < hi or hi / lo < 1.0 + 1e-13:
            break
        if float(_frequencies_at(lam, w, mid).sum()) > budget:
            lo = mid
        else:
            hi = mid
    out.update(zip(keys, (float(f) for f in _frequencies_at(lam, w, lo)), strict=True))
    return out


def listing_frequencies(
    yields: Mapping[K, float], departures: Mapping[K, float], budget: float, worth_ms: float
) -> dict[K, float]:
    """For discovery, with how long each page keeps a link listed (ours): the frequencies
    that maximise the worth of the stories found, Σ y_i·F̄(μ_i + β, f_i), β = 1/worth_ms.

    New stories appear on page i at rate y_i and stay listed for an exponential time of
    rate μ_i (`revisit_lifetimes`). With a visit every T, a story appeared a ~ U[0, T]
    before the next visit; it is still listed with probability e^(−μa), and a story found
    a late is worth e^(−βa) (news ages). Its mean worth, (1/T)∫₀ᵀ e^(−(μ+β)a) da, is
    F̄(μ + β, 1/T): the weighted freshness problem with rates μ_i + β and weights y_i. With
    β → 0 it maximises the stories found; a page whose stories outlive the interval needs
    few revisits, a page they soon leave many or (when too few are left) none. As the
    budget grows, f_i → √(y_i(μ_i + β)/2ν), ν the multiplier: toward the square-root rule's
    √y_i.
    """
    if not (math.isfinite(worth_ms) and worth_ms > 0):
        raise ValueError(f"worth_ms must be finite and > 0, got {worth_ms}")
    _check(departures, budget)
    beta = 1.0 / worth_ms
    rates = {k: departures.get(k, 0.0) + beta for k in yields}
    return weighted_freshness_frequencies(rates, yields, budget)


def floored_frequencies(
    share: Callable[[float, frozenset[K]], Mapping[K, float]],
    floors: Mapping[K, float],
    budget: float,
) -> tuple[dict[K, float], frozenset[K]]:
    """The frequencies of an allocation rule with every page of `floors` revisited at least
    at its floor φ_i (ours, the discovery rule's floor of revisits, `PageListings.floors`),
    and the pages held at their floor; `share(b, fixed)` is the rule's frequencies for a
    budget b among its pages but `fixed`.

    The allocations above maximise a sum of terms each concave in its page's frequency, so
    with the bounds f_i ≥ φ_i the optimum (Karush-Kuhn-Tucker) holds at its floor every page
    the rule would put below it and shares the rest of the budget among the others by the
    rule: the pages put below their floor are fixed at it, their floors taken off the
    budget, and the rest shared again, until no page is below its floor. Floors that add
    up to the budget or more are not kept (they would leave nothing to the pages that find
    the most, and could not all be met): the rule's frequencies alone.
    """
    _check(floors, budget)
    fixed: dict[K, float] = {}
    if sum(floors.values()) >= budget:
        floors = {}
    while True:
        free = share(max(0.0, budget - sum(fixed.values())), frozenset(fixed))
        below = {k: phi for k, phi in floors.items() if k not in fixed and free.get(k, 0.0) < phi}
        if not below:
            out = {k: f for k, f in free.items() if k not in fixed}
            out.update(fixed)
            return out, frozenset(fixed)
        fixed.update(below)


def due_ms(last_visit_ms: int, frequency: float) -> int | None:
    """When a page revisited at `frequency` (per ms) is next due; None when it gets no
    revisits. In a live frontier this is the revisit entry's `not_before`."""
    if frequency <= 0:
        return None
    return last_visit_ms + max(1, round(1.0 / frequency))
