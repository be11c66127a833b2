"""A forager fleet given what the discovery rule learns: its paths start at the page the
learned schedule has due.

The fleet of Palotai, Farkas & Lőrincz 2005 (`forager_fleet.run_fleet`, weblog selection)
walks as in the paper; only where a path starts changes. Every page a forager downloads
gets a revisit record (`state/revisits.py`): what it showed that the fleet had not
downloaded, and the stories the agent rewarded in that step. Every `plan_ms` the discovery
rule (`square_root_frequencies` over `discovery_rate`) shares the fleet's path starts among
the pages; a path that starts when a page is due begins there (the earliest due), else
where the forager's weblog says. The schedule is ours, the fleet the paper's.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import replace
from pathlib import Path

from frontierflow.pipelines.evaluation.forager_fleet import (
    BIN_MS,
    FleetMetrics,
    ForagerSetup,
    run_fleet,
)
from frontierflow.pipelines.evaluation.news_site import DAY_MS, NewsSite
from frontierflow.pipelines.evaluation.revisit_policy import Policy, RevisitPolicySettings
from frontierflow.pipelines.evaluation.revisits import RevisitMetrics
from frontierflow.state.forager import Variant
from frontierflow.state.revisit_budget import due_ms, square_root_frequencies
from frontierflow.state.revisits import (
    PageRevisits,
    discovery_rate,
    first_visit,
    link_fetched,
    outlink_fingerprint,
    record_visit,
)

FLEET_VARIANT = Variant.WL
"""Weblog selection: the fleet that found the most on the news site (docs/FORAGERS.md)."""


class LearnedPathStarts:
    """The discovery rule's schedule of path starts (a `forager_fleet.PathStarts`)."""

    def __init__(self, settings: RevisitPolicySettings, start_ms: int) -> None:
        self.settings = settings
        self.pages: dict[str, PageRevisits] = {}
        self.known: set[str] = set()
        self.frequency: dict[str, float] = {}
        self.due: dict[str, int] = {}
        self._heap: list[tuple[int, str]] = []
        self.next_plan = start_ms
        self.fetched = 0
        self.rewarded = 0
        self.starts = 0
        self.scheduled = 0
        """Path starts, and of them those the schedule chose."""
        self._marks: deque[tuple[int, int]] = deque([(start_ms, 0)])

    def start(self, chosen: str, t: int) -> str:
        """The page due first if one is due by `t`, else `chosen` (the forager's)."""
        if t >= self.next_plan:
            self._plan(t)
            self.next_plan = t + self.settings.plan_ms
        self.starts += 1
        while self._heap:
            due, url = self._heap[0]
            if self.due.get(url) != due:
                heapq.heappop(self._heap)
            elif due <= t:
                heapq.heappop(self._heap)
                del self.due[url]
                self.scheduled += 1
                return url
            else:
                break
        return chosen

    def step(self, url: str, links: tuple[str, ...], t: int, rewarded: int) -> None:
        """A forager downloaded `url` and every page it links to (so nothing waits)."""
        new = [u for u in dict.fromkeys(links) if u not in self.known]
        self.known.update(new)
        self.known.add(url)
        self.fetched += len(new)
        self.rewarded += rewarded
        fp = outlink_fingerprint(links)
        old = self.pages.get(url)
        if old is None:
            page = first_visit(t, fp)
        else:
            page = replace(record_visit(old, t, fp, len(new), self.settings.revisit), waiting=0)
        for _ in range(rewarded):
            page = link_fetched(page, True)
        self.pages[url] = page
        freq = self.frequency.get(url, 0.0)
        due = due_ms(t, freq)
        if due is not None:
            self.due[url] = due
            heapq.heappush(self._heap, (due, url))

    def _plan(self, t: int) -> None:
        """Frequencies over the pages with an estimate, sharing the last day's path starts."""
        self._marks.append((t, self.starts))
        while len(self._marks) > 2 and self._marks[1][0] <= t - DAY_MS:
            self._marks.popleft()
        (t0, s0), (t1, s1) = self._marks[0], self._marks[-1]
        budget = (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0
        hit_rate = (self.rewarded + 1) / (self.fetched + 2)
        rates = {}
        for url, page in self.pages.items():
            rate = discovery_rate(page, self.settings.revisit, hit_rate)
            if rate is not None and rate > 0:
                rates[url] = rate
        self.frequency = square_root_frequencies(rates, budget)
        self.due.clear()
        self._heap.clear()
        for url, freq in self.frequency.items():
            due = due_ms(self.pages[url].last_visit_ms, freq)
            if due is not None:
                self.due[url] = due
                self._heap.append((due, url))
        heapq.heapify(self._heap)


def run_fleet_revisits(
    site: NewsSite,
    topic: tuple[str, ...],
    policy: Policy,
    download_ms: int,
    settings: RevisitPolicySettings,
    measure_from_ms: int,
    run: int,
) -> RevisitMetrics:
    """One run of the weblog fleet (`Policy.FLEET`), or of the same fleet whose paths start
    on the learned schedule (`Policy.FLEET_LEARNED`), random seed `run`, counted from
    `measure_from_ms` (the fleet keeps what it learned in the warm-up)."""
    setup = ForagerSetup(news=Path(), topic=topic, download_ms=download_ms)
    starts = None
    if policy is Policy.FLEET_LEARNED:
        starts = LearnedPathStarts(settings, site.start_ms)
    elif policy is not Policy.FLEET:
        raise ValueError(f"{policy.value} is not a fleet")
    fleet = run_fleet(site, setup, FLEET_VARIANT, run, path_starts=starts)
    return measured_from(fleet, measure_from_ms, site.start_ms)


def measured_from(fleet: FleetMetrics, measure_from_ms: int, start_ms: int) -> RevisitMetrics:
    """A fleet run counted from `start_ms` as if counted from `measure_from_ms` (a whole
    number of 3-hour bins later): the downloads and rewards of the later bins, the rewarded
    times (delay and freshness read them). Sends are not binned: none are counted."""
    skip, rest = divmod(measure_from_ms - start_ms, BIN_MS)
    if rest or skip < 0:
        raise ValueError("a fleet's warm-up must be a whole number of 3-hour bins")
    m = FleetMetrics(
        downloaded=sum(fleet.bin_downloads[skip:]),
        relevant=sum(fleet.bin_relevant[skip:]),
        rewarded_at=fleet.rewarded_at,
        bin_downloads=fleet.bin_downloads[skip:],
        bin_relevant=fleet.bin_relevant[skip:],
    )
    return RevisitMetrics(fleet=m)
