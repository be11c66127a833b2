"""How long a page keeps a link listed, learned from consecutive visits of the page.

A hub lists a story for a while: the home page while the story is on it, a section page
until newer stories of its section push it off. A page revisited every T shows a link that
stays listed for L only if a visit falls within its stay; for stays exponentially
distributed with rate μ = 1/L (memoryless, so a link first seen at a visit has the same
chance to stay until the next as a link that just appeared), the share of the links that
appear on the page and are seen is F̄(μ, 1/T) = (1/(μT))(1 − e^(−μT)), the freshness
function of Cho & Garcia-Molina 2003 (TODS) with the page's change rate replaced by the
links' departure rate (`revisit_budget.freshness`).

`PageListing` keeps the links of the last visit and those of them that appeared on the page
after its first visit (tracked: a page's navigation, there from the start, never leaves and
would make every stay look long). Each tracked link looked for at the next visit is one
trial: it left or it stayed over the interval. The departure rate is Cho & Garcia-Molina
2003 (TOIT)'s bias-reduced estimator over those trials, as `revisits.change_rate` is over
a page's visits (here a trial is a link-interval and a change a departure). Pure
transitions, the clock passed in; the simulation's, not the live job's (it keeps the links).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PageListing:
    """One page's listed links and the departures seen among them."""

    last_visit_ms: int
    listed: frozenset[str]
    """The links the last visit showed."""
    tracked: frozenset[str]
    """Of them, those that appeared on the page after its first visit."""
    trials: int = 0
    """n: tracked links looked for at the visit after (link-intervals)."""
    departures: int = 0
    """X: of them, those the next visit no longer showed."""
    exposure_ms: float = 0.0
    """The sum of the intervals of those trials (n · I, I their mean interval)."""


def first_listing(now_ms: int, links: Iterable[str]) -> PageListing:
    """A page's first visit: its links are its navigation or older; none is tracked."""
    return PageListing(now_ms, frozenset(links), frozenset())


def record_listing(listing: PageListing, now_ms: int, links: Iterable[str]) -> PageListing:
    """A visit at `now_ms` showing `links`: every tracked link is a trial over the interval
    (a departure if it is gone), and the links new to the page are tracked from now."""
    if now_ms < listing.last_visit_ms:
        raise ValueError(f"visit at {now_ms} before the last visit at {listing.last_visit_ms}")
    now = frozenset(links)
    n = len(listing.tracked)
    return PageListing(
        last_visit_ms=now_ms,
        listed=now,
        tracked=(listing.tracked & now) | (now - listing.listed),
        trials=listing.trials + n,
        departures=listing.departures + len(listing.tracked - now),
        exposure_ms=listing.exposure_ms + n * (now_ms - listing.last_visit_ms),
    )


def departure_rate(trials: float, departures: float, exposure_ms: float) -> float | None:
    """Departures per millisecond of a listed link: r̂ = −log((n − X + 0.5)/(n + 0.5)) over
    the mean interval I = exposure / n (Cho & Garcia-Molina 2003, TOIT); None without a
    trial."""
    if trials <= 0 or exposure_ms <= 0:
        return None
    x = min(departures, trials)
    r = -math.log((trials - x + 0.5) / (trials + 0.5))
    return r / (exposure_ms / trials)


def listing_rate(listing: PageListing) -> float | None:
    """The page's departure rate (`departure_rate` of its trials); None without a trial."""
    return departure_rate(listing.trials, listing.departures, listing.exposure_ms)


def pooled_rate(listings: Mapping[str, PageListing]) -> float | None:
    """The departure rate of every page's trials together: the prior of a page without
    trials of its own."""
    ls = listings.values()
    return departure_rate(
        sum(p.trials for p in ls), sum(p.departures for p in ls), sum(p.exposure_ms for p in ls)
    )


def residual_worth(
    stories: Mapping[str, float], others: Iterable[tuple[Collection[str], float]]
) -> float:
    """The worth of a page's stories that the other pages revisited do not catch: Σ_j w_j ·
    Π_p (1 − c_p) over the pages p that listed story j, c_p the share of what appears on p
    that its revisits catch (`revisit_budget.freshness` of its departure rate and its
    frequency), the pages' catches taken as independent. `stories`: story → w_j, its
    worth (1 when rewarded, its odds when not yet fetched, weighed down by its age);
    `others`: (the links a page ever listed, c_p)."""
    others = [(shown, 1.0 - caught) for shown, caught in others if caught > 0]
    total = 0.0
    for story, worth in stories.items():
        for shown, missed in others:
            if story in shown:
                worth *= missed
        total += worth
    return total
