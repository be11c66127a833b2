"""The discovery rule's floor of revisits (`PageListings.floors`), worked out by hand."""

from __future__ import annotations

import math

import pytest

from frontierflow.pipelines.evaluation.revisit_listings import PageListings
from frontierflow.state.revisits import HOUR_MS

DAY_MS = 24 * HOUR_MS
LINKS = [f"story-{k}" for k in range(10)]


def _listings() -> PageListings:
    """`europe` lists nav at 0, nav and ten stories at 1 h, nav alone at 2 h: ten trials
    over 1 h, ten departures, r̂ = −log((10 − 10 + 0.5)/(10 + 0.5)) = log 21 = 3.044522 an
    hour (Cho & Garcia-Molina 2003, TOIT). `football` and `uk` are downloaded once (no
    trial: they take every page's rate, europe's)."""
    listings = PageListings()
    listings.visit("europe", 0, ("nav",))
    listings.visit("europe", HOUR_MS, ("nav", *LINKS))
    listings.visit("europe", 2 * HOUR_MS, ("nav",))
    listings.visit("football", 0, ("goal-1", "goal-2"))
    listings.visit("uk", 0, ("nav", "goal-1"))
    return listings


def test_a_page_listing_links_on_the_topic_gets_a_floor() -> None:
    """nav is on the topic (worth 1), goals are not (0). europe lists nav (mean 1 ≥ 0.5):
    its floor is max(μ, 1/day) = μ = log 21 an hour (its links stay 20 min on average,
    less than a day); uk lists nav and a goal (mean 0.5 ≥ 0.5): every page's rate, the
    same; football (mean 0) gets none. With a horizon of 10 min (1/10 min = 6 an hour,
    above log 21) both floors are 6 an hour."""
    listings = _listings()
    worth = {"nav": 1.0}.get
    floors = listings.floors(["europe", "football", "uk"], lambda u: worth(u, 0.0), 0.5, DAY_MS)
    mu = math.log(21) / HOUR_MS
    assert floors == {"europe": pytest.approx(mu, rel=1e-9), "uk": pytest.approx(mu, rel=1e-9)}
    floors = listings.floors(["europe", "uk"], lambda u: worth(u, 0.0), 0.5, 10 * 60_000)
    assert floors == {"europe": 6 / HOUR_MS, "uk": 6 / HOUR_MS}


def test_links_that_outstay_the_horizon_give_one_revisit_per_horizon() -> None:
    """A page whose links never left (no departure in ten trials over 1 h: r̂ =
    −log(10.5/10.5) = 0) is revisited once per horizon: 1/day."""
    listings = PageListings()
    listings.visit("asia", 0, ("nav",))
    listings.visit("asia", HOUR_MS, ("nav", *LINKS))
    listings.visit("asia", 2 * HOUR_MS, ("nav", *LINKS))
    assert listings.floors(["asia"], lambda u: 1.0, 0.5, DAY_MS) == {"asia": 1 / DAY_MS}
