"""The discovery rule with listing lifetimes: what each page listed, how long its links
stayed, and the frequencies that find the most stories, sooner (`listing_frequencies`).

Per page: its `PageListing` (departures of its links, `state/revisit_lifetimes.py`), every
link it ever listed, and the links that appeared on it after its first visit, with when
each was first seen there. At a plan, a page's rate of stories is the worth of the stories
that appeared on it (1 each when rewarded, their kind's odds when not fetched yet, weighed
down by age with the record's half-life) that the other pages given revisits do not catch
(`residual_worth`, each with the share of a story's worth its frequency delivers), over the
time watched and over the share its own visits catch: so the home page is valued by the
stories it lists, all of them, and a section page by those the home page's revisits miss,
which is how stories that stay on the home page for less than its interval are caught.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from frontierflow.state.revisit_budget import freshness, listing_frequencies
from frontierflow.state.revisit_lifetimes import (
    PageListing,
    first_listing,
    listing_rate,
    pooled_rate,
    record_listing,
    residual_worth,
)
from frontierflow.state.revisits import PageRevisits

MIN_CAUGHT = 0.1
"""The least share of a page's stories its visits are taken to catch (a page watched far
less often than its links stay is not credited with ten times what it showed)."""
MIN_TRIALS = 10
"""Trials (`PageListing.trials`) before a page's own departure rate is used."""


class PageListings:
    """What every page the crawl downloaded listed, visit by visit."""

    def __init__(self) -> None:
        self.listings: dict[str, PageListing] = {}
        self.shown: dict[str, set[str]] = {}
        """Every link each page listed."""
        self.appeared: dict[str, dict[str, int]] = {}
        """The links that appeared on each page after its first visit, and when first seen."""

    def visit(self, url: str, t: int, links: tuple[str, ...]) -> None:
        """A download of `url` at `t` showing `links` (the first or a later one)."""
        old = self.listings.get(url)
        if old is None:
            self.listings[url] = first_listing(t, links)
            self.shown[url] = set(links)
            self.appeared[url] = {}
            return
        self.listings[url] = record_listing(old, t, links)
        shown, appeared = self.shown[url], self.appeared[url]
        for link in links:
            if link not in shown:
                shown.add(link)
                appeared[link] = t

    def frequencies(
        self,
        pages: Mapping[str, PageRevisits],
        candidates: list[str],
        before: Mapping[str, float],
        worth: Callable[[str, int], float],
        budget: float,
        worth_ms: int,
    ) -> dict[str, float]:
        """`listing_frequencies` over `candidates` (pages with an estimate): `before` the
        frequencies of the last plan (who catches what), `worth(link, first_seen_ms)` a
        story's worth. A page with fewer than `MIN_TRIALS` trials takes every page's rate."""
        prior = pooled_rate(self.listings) or 0.0
        beta = 1.0 / worth_ms
        mu = {}
        for url in {*candidates, *before}:
            listing = self.listings[url]
            rate = listing_rate(listing) if listing.trials >= MIN_TRIALS else None
            mu[url] = prior if rate is None else rate
        catching = {p: freshness(mu[p] + beta, f) for p, f in before.items() if f > 0}
        yields = {}
        for url in candidates:
            page = pages[url]
            stories = {j: worth(j, at) for j, at in self.appeared[url].items()}
            stories = {j: w for j, w in stories.items() if w > 0}
            others = [(self.shown[p], c) for p, c in catching.items() if p != url]
            found = residual_worth(stories, others) / page.observed_ms
            caught = freshness(mu[url], page.visits / page.observed_ms)
            yields[url] = found / max(MIN_CAUGHT, caught)
        return listing_frequencies(yields, mu, budget, worth_ms)
