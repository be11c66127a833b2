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
A page never revisited has no such stories; with `floor_ms`, the hubs whose listed links are
on the topic get a floor of revisits (`floors`), so that they are watched at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from frontierflow.pipelines.evaluation.revisit_links import link_folder
from frontierflow.state.revisit_budget import (
    floored_frequencies,
    freshness,
    listing_frequencies,
)
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
        self.floored: frozenset[str] = frozenset()
        """The pages the last plan held at their floor (not counted on to catch stories)."""
        self.hubs: set[str] = set()
        self.hub_folders: set[str] = set()
        """The pages visited that are hubs (they state no publication time), and their
        folders (`revisit_links.link_folder`)."""

    def visit(self, url: str, t: int, links: tuple[str, ...], hub: bool = False) -> None:
        """A download of `url` at `t` showing `links` (the first or a later one); `hub`: the
        page states no publication time (it lists stories, it is not one)."""
        if hub:
            self.hubs.add(url)
            self.hub_folders.add(link_folder(url))
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

    def in_hub_folder(self, link: str) -> bool:
        """Whether `link` lies in the folder of a hub visited (a section page, say)."""
        return link_folder(link) in self.hub_folders

    def departure_rates(self, urls: Iterable[str]) -> dict[str, float]:
        """Each page's departure rate μ; a page with fewer than `MIN_TRIALS` trials takes
        every page's rate (0 before any trial)."""
        prior = pooled_rate(self.listings) or 0.0
        mu = {}
        for url in urls:
            listing = self.listings[url]
            rate = listing_rate(listing) if listing.trials >= MIN_TRIALS else None
            mu[url] = prior if rate is None else rate
        return mu

    def floors(
        self, hubs: Iterable[str], worth: Callable[[str], float], on_topic: float, floor_ms: int
    ) -> dict[str, float]:
        """The floor of revisits of the listing pages `hubs` whose listed links are worth a
        download on average (mean `worth(link)` over the last visit's links at least
        `on_topic`): max(μ, 1/floor_ms), a revisit at least once per the mean stay of a link
        (1/μ) or per `floor_ms` if that is shorter (`floor_ms` the judge's horizon: a story
        found later is too old to be rewarded), so that a story listed there and missed
        elsewhere is still found, in time (`floored_frequencies`). None when `floor_ms` is
        0."""
        if floor_ms <= 0:
            return {}
        hubs = [u for u in hubs if self._mean_worth(u, worth) >= on_topic]
        return {u: max(mu, 1.0 / floor_ms) for u, mu in self.departure_rates(hubs).items()}

    def _mean_worth(self, url: str, worth: Callable[[str], float]) -> float:
        listed = self.listings[url].listed
        return sum(worth(link) for link in listed) / len(listed) if listed else 0.0

    def frequencies(
        self,
        pages: Mapping[str, PageRevisits],
        candidates: list[str],
        before: Mapping[str, float],
        worth: Callable[[str, int], float],
        budget: float,
        worth_ms: int,
        floors: Mapping[str, float] | None = None,
    ) -> dict[str, float]:
        """`listing_frequencies` over `candidates` (pages with an estimate), every page of
        `floors` revisited at least at its floor (`floored_frequencies`): `before` the
        frequencies of the last plan (who catches what), `worth(link, first_seen_ms)` a
        story's worth."""
        floors = floors or {}
        beta = 1.0 / worth_ms
        mu = self.departure_rates({*candidates, *before, *floors})
        catching = {
            p: freshness(mu[p] + beta, f)
            for p, f in before.items()
            if f > 0 and p not in self.floored
        }
        yields = {}
        for url in candidates:
            page = pages[url]
            stories = {j: worth(j, at) for j, at in self.appeared[url].items()}
            stories = {j: w for j, w in stories.items() if w > 0}
            others = [(self.shown[p], c) for p, c in catching.items() if p != url]
            found = residual_worth(stories, others) / page.observed_ms
            caught = freshness(mu[url], page.visits / page.observed_ms)
            yields[url] = found / max(MIN_CAUGHT, caught)
        for url in floors:
            yields.setdefault(url, 0.0)

        def share(b: float, fixed: frozenset[str]) -> dict[str, float]:
            free = {u: y for u, y in yields.items() if u not in fixed}
            return listing_frequencies(free, mu, b, worth_ms)

        frequencies, self.floored = floored_frequencies(share, floors, budget)
        return frequencies
