"""How long a page keeps a link listed (departures over consecutive visits, Cho &
Garcia-Molina 2003 (TOIT)'s estimator over link-intervals), the worth of what the other pages
do not catch, and the weighted freshness allocation (Cho & Garcia-Molina 2003, TODS) the
discovery rule with listing lifetimes uses, with values worked by hand."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from frontierflow.state.revisit_budget import (
    floored_frequencies,
    freshness,
    listing_frequencies,
    marginal_freshness,
    optimal_freshness_frequencies,
    proportional_frequencies,
    weighted_freshness_frequencies,
)
from frontierflow.state.revisit_lifetimes import (
    departure_rate,
    first_listing,
    listing_rate,
    pooled_rate,
    record_listing,
    residual_worth,
)
from frontierflow.state.revisits import HOUR_MS


def test_only_links_that_appeared_after_the_first_visit_are_tracked() -> None:
    """First visit at 0: nav, a (neither tracked: a page's navigation never leaves). At 1 h:
    nav, a, b, c: b and c appeared, no trial yet. At 3 h: nav, b, d: b and c were looked for
    over 2 h, c is gone (n = 2, X = 1, n·I = 2 · 2 h = 4 h); a is gone too but was never
    tracked; d is tracked from now. r̂ = −log((2 − 1 + 0.5)/(2 + 0.5)) = −log 0.6 = 0.510826
    over I = 4 h / 2 = 2 h: 0.255413 departures per hour, a stay of 3.915 h on average."""
    listing = first_listing(0, ["nav", "a"])
    assert listing.tracked == frozenset()
    listing = record_listing(listing, HOUR_MS, ["nav", "a", "b", "c"])
    assert listing.tracked == {"b", "c"} and listing.trials == 0
    assert listing_rate(listing) is None
    listing = record_listing(listing, 3 * HOUR_MS, ["nav", "b", "d"])
    assert listing.tracked == {"b", "d"}
    assert (listing.trials, listing.departures, listing.exposure_ms) == (2, 1, 4 * HOUR_MS)
    rate = listing_rate(listing)
    assert rate is not None and rate * HOUR_MS == pytest.approx(0.255413, abs=1e-6)


def test_no_departure_seen_is_rate_zero_and_a_visit_back_in_time_is_refused() -> None:
    assert departure_rate(5, 0, 10 * HOUR_MS) == 0.0
    assert departure_rate(0, 0, 0.0) is None
    with pytest.raises(ValueError, match="before the last visit"):
        record_listing(first_listing(10, ["a"]), 9, ["a"])


def test_the_pooled_rate_counts_every_pages_trials_together() -> None:
    """Page p: n = 2, X = 1, 4 h (above); page q: b and c looked for over 1 h, both stay
    (n = 2, X = 0, 2 h). Together n = 4, X = 1, n·I = 6 h: r̂ = −log(3.5/4.5) = 0.251314 over
    I = 1.5 h: 0.167543 per hour."""
    p = record_listing(first_listing(0, ["nav"]), HOUR_MS, ["nav", "b", "c"])
    p = record_listing(p, 3 * HOUR_MS, ["nav", "b"])
    q = record_listing(first_listing(0, []), HOUR_MS, ["b", "c"])
    q = record_listing(q, 2 * HOUR_MS, ["b", "c"])
    assert (q.trials, q.departures, q.exposure_ms) == (2, 0, 2 * HOUR_MS)
    rate = pooled_rate({"p": p, "q": q})
    assert rate is not None and rate * HOUR_MS == pytest.approx(0.167543, abs=1e-6)
    assert pooled_rate({}) is None


def test_the_worth_left_is_what_no_other_page_catches() -> None:
    """Stories s1 (worth 1, listed on the home page, which catches 0.8 of what it lists), s2
    (worth 1, on the home page and a section page that catches 0.5), s3 (worth 0.5, on
    neither). Left: s1 1 · 0.2 = 0.2, s2 1 · 0.2 · 0.5 = 0.1, s3 0.5: 0.8. A page that
    catches nothing takes nothing away."""
    stories = {"s1": 1.0, "s2": 1.0, "s3": 0.5}
    others = [({"s1", "s2"}, 0.8), ({"s2"}, 0.5), ({"s1", "s2", "s3"}, 0.0)]
    assert residual_worth(stories, others) == pytest.approx(0.8)
    assert residual_worth(stories, []) == pytest.approx(2.5)


# μ = 1 − 2/e makes r = 1 the optimum of a page with λ = 1, w = 1 (f = 1); a page with λ = 2
# and w = 2 has μλ/w = μ too, so r = 1 and f = λ/r = 2: with a budget of 3, f = 1 and 2.
MU = 1 - 2 / math.e


def test_weighted_freshness_worked_by_hand() -> None:
    f = weighted_freshness_frequencies({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}, 3.0)
    assert f["a"] == pytest.approx(1.0, abs=1e-5) and f["b"] == pytest.approx(2.0, abs=1e-5)
    # the Lagrange condition: w·∂F̄/∂f is μ on every revisited page
    assert 2.0 * marginal_freshness(2.0, f["b"]) == pytest.approx(MU, abs=1e-6)
    # unweighted, b (changing twice as fast) gets less than with twice a's weight
    plain = optimal_freshness_frequencies({"a": 1.0, "b": 2.0}, 3.0)
    assert plain["a"] > 1.0 and plain["b"] < 2.0 - 1e-3
    # a page of weight 0 gets none
    none = weighted_freshness_frequencies({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 0.0}, 3.0)
    assert none == {"a": pytest.approx(3.0), "b": 0.0}


def test_listing_frequencies_add_the_worths_decay_to_the_departure_rate() -> None:
    """Yields 1 and 2, departures 0.5 and 1.5, worth_ms 2 (β = 0.5): rates 1 and 2, the case
    above: f = 1 and 2. Stories found at f = 1 from a = F̄(0.5, 1) = 2(1 − e^(−0.5)) =
    0.786939 of those appearing (a link listed for 2 on average, a visit every 1)."""
    f = listing_frequencies({"a": 1.0, "b": 2.0}, {"a": 0.5, "b": 1.5}, 3.0, 2.0)
    assert f["a"] == pytest.approx(1.0, abs=1e-5) and f["b"] == pytest.approx(2.0, abs=1e-5)
    assert freshness(0.5, 1.0) == pytest.approx(0.786939, abs=1e-6)
    with pytest.raises(ValueError, match="worth_ms"):
        listing_frequencies({"a": 1.0}, {"a": 0.5}, 3.0, 0.0)


def test_a_page_whose_stories_outlive_the_interval_needs_fewer_revisits() -> None:
    """Same yield, one page's links stay 10× longer (departures 0.1 against 1, β → 0): at a
    small budget the long-lived page is worth more per revisit (w/λ = 10 against 1 at
    f → 0) and gets more; at a large one the short-lived page gets more (f → √(yλ/2ν), ν
    the multiplier)."""
    small = listing_frequencies({"long": 1.0, "short": 1.0}, {"long": 0.1, "short": 1.0}, 0.2, 1e12)
    assert small["long"] > small["short"]
    large = listing_frequencies({"long": 1.0, "short": 1.0}, {"long": 0.1, "short": 1.0}, 50, 1e12)
    assert large["short"] > large["long"]


def _proportional_but(
    weights: dict[str, float],
) -> Callable[[float, frozenset[str]], dict[str, float]]:
    """A rule for `floored_frequencies`: shares in proportion to `weights`, among the pages
    not held at their floor."""
    return lambda budget, fixed: proportional_frequencies(
        {k: w for k, w in weights.items() if k not in fixed}, budget
    )


def test_a_page_below_its_floor_is_held_there_and_the_rest_shared_by_the_rule() -> None:
    """Weights a 3, b 1, budget 4: the rule gives a 3, b 1. With b's floor 2, b is held at
    2 and the 2 left go to a alone; with b's floor 0.5 nothing changes. A page the rule
    does not know (c, floor 1) is held at its floor and the rule shares 3: a 2.25, b 0.75."""
    share = _proportional_but({"a": 3.0, "b": 1.0})
    f, held = floored_frequencies(share, {"b": 2.0}, 4.0)
    assert f == {"a": pytest.approx(2.0), "b": 2.0} and held == {"b"}
    f, held = floored_frequencies(share, {"b": 0.5}, 4.0)
    assert f == {"a": pytest.approx(3.0), "b": pytest.approx(1.0)} and held == frozenset()
    f, held = floored_frequencies(share, {"c": 1.0}, 4.0)
    assert f == {"a": pytest.approx(2.25), "b": pytest.approx(0.75), "c": 1.0}
    assert held == {"c"}


def test_floors_the_budget_cannot_cover_are_not_kept() -> None:
    """Floors a 3 and b 2 add up to 5, more than the budget 4: the rule's frequencies alone
    (a 3, b 1), no page held."""
    share = _proportional_but({"a": 3.0, "b": 1.0})
    f, held = floored_frequencies(share, {"a": 3.0, "b": 2.0}, 4.0)
    assert f == {"a": pytest.approx(3.0), "b": pytest.approx(1.0)} and held == frozenset()
