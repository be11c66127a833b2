"""The closed loop of Palotai, Farkas & Lőrincz 2005 (CEEMAS): a forager fleet
hunting new stories on a news site in simulated time.

The fleet (state/foraging.py) and the reinforcing agent (state/forager_agent.py) run over
`NewsSite`: the RA gives each forager a time slice in turn; in each step a forager downloads
the page it chose and every page it links to (Palotai, Farkas & Lőrincz 2005 (long version): it
must download a page to know its x), sends the possibly relevant ones (not older than 24 h,
not sent by it before) to the RA, and learns from the reinforcements. Every download takes
`download_ms` of simulated time. After each slice the RA multiplies or deletes the forager.
A baseline that ignores learning revisits the home page and the topic's section pages in a
fixed round robin, downloads each linked page it has not downloaded before and sends what is
fresh.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from frontierflow.connectors.news import iso_ms, read_snapshot_times, read_stays
from frontierflow.pipelines.evaluation.news_site import (
    HOME,
    HOUR_MS,
    NewsSite,
    Page,
    SiteSettings,
    section_url,
)
from frontierflow.state.forager import ForagerState, Variant
from frontierflow.state.forager_agent import (
    AgentParams,
    Decision,
    DocumentVerdict,
    judge,
    manage_forager,
    new_fleet,
    next_forager,
    score_send,
)
from frontierflow.state.foraging import (
    ForagerParams,
    add_reward,
    is_possibly_relevant,
    multiply,
    new_forager,
    select_next,
    visit,
)

WORLD_NEWS = (
    "US & Canada",
    "Europe",
    "UK",
    "Asia",
    "Africa",
    "Middle East",
    "World",
    "US",
    "Latin America & Caribbean",
    "Australia",
    "India",
    "China",
    "UK Politics",
)
"""The default topic: the world-news sections (about a third of the stories)."""

DEFAULT_START = "2022-03-01T00:00:00Z"
DEFAULT_DOWNLOAD_MS = 10_000
BIN_MS = 3 * HOUR_MS
"""The paper's Fig. 1(b): download efficiency in 3-hour intervals."""
Progress = Callable[[int], None]
"""Called with simulated milliseconds advanced."""


@dataclass(frozen=True, slots=True)
class ForagerSetup:
    news: Path
    start: str = DEFAULT_START
    days: float = 8.0
    """The paper's Fig. 1(b) spans 8 days."""
    topic: tuple[str, ...] = WORLD_NEWS
    download_ms: int = DEFAULT_DOWNLOAD_MS
    """Ours: one page every 10 s, a common crawl delay for a single host. The paper's fleets
    downloaded 540–670k pages in 8 days (≈1.3 s a page) from a far larger site; at that rate
    this site (≈50 new stories a day) is downloaded whole every few minutes and every
    variant saturates (docs/FORAGERS.md shows both)."""
    params: ForagerParams = field(default_factory=ForagerParams)
    agent: AgentParams = field(default_factory=AgentParams)
    site: SiteSettings = field(default_factory=SiteSettings)


@dataclass(slots=True)
class FleetMetrics:
    """One run's counters and the times the series and freshness are computed from."""

    downloaded: int = 0
    sent: int = 0
    relevant: int = 0
    found: set[str] = field(default_factory=set)
    rewarded_at: dict[str, int] = field(default_factory=dict)
    bin_downloads: list[int] = field(default_factory=list)
    bin_relevant: list[int] = field(default_factory=list)
    population: list[int] = field(default_factory=list)

    def count_download(self, url: str, t: int, start: int) -> None:
        self.downloaded += 1
        self.found.add(url)
        b = (t - start) // BIN_MS
        while len(self.bin_downloads) <= b:
            self.bin_downloads.append(0)
            self.bin_relevant.append(0)
        self.bin_downloads[b] += 1


class StoryJudge:
    """The RA's document side: verdicts keyed by URL and the topic rule."""

    def __init__(self, site: NewsSite, topic: Sequence[str], agent: AgentParams) -> None:
        self.site = site
        self.topic = frozenset(topic)
        self.agent = agent
        self.verdicts: dict[str, DocumentVerdict] = {}

    def on_topic(self, page: Page) -> bool:
        return page.section is not None and page.section in self.topic

    def judge(self, url: str, page: Page, forager_id: int, t: int) -> tuple[bool, float]:
        verdict = self.verdicts.get(url)
        new, answer = judge(
            verdict, forager_id, page.published_ms, t, self.on_topic(page), self.agent
        )
        if new is not None and verdict is None:
            self.verdicts[url] = new
        return answer.relevant, answer.reinforcement


class PathStarts(Protocol):
    """Where a forager's path starts, when something other than its weblog chooses
    (`pipelines/evaluation/revisit_fleet.py`: the discovery rule's schedule)."""

    def start(self, chosen: str, t: int) -> str:
        """The URL a path starting at `t` begins at; `chosen` is the forager's own choice."""
        ...

    def step(self, url: str, links: tuple[str, ...], t: int, rewarded: int) -> None:
        """A forager downloaded `url` (showing `links`) and its links; `rewarded` of the
        step's documents were rewarded."""
        ...


def run_fleet(
    site: NewsSite,
    setup: ForagerSetup,
    variant: Variant,
    seed: int,
    progress: Progress | None = None,
    path_starts: PathStarts | None = None,
) -> FleetMetrics:
    """One closed-loop run of a fleet of `variant` foragers (see the module docstring);
    with `path_starts`, paths begin where it says."""
    params, agent = setup.params, setup.agent
    start, end, dl = site.start_ms, site.end_ms, setup.download_ms
    seeds = site.seeds(params.start_list)
    fleet = new_fleet(agent)
    foragers: dict[int, ForagerState] = {
        i: new_forager(i, variant, seeds, seed, params) for i in fleet.foragers
    }
    sent_by: dict[int, set[str]] = {i: set() for i in fleet.foragers}
    ra = StoryJudge(site, setup.topic, agent)
    m = FleetMetrics()
    t = start
    current = next_forager(fleet, None)
    while t < end:
        slice_end = min(end, t + agent.time_slice_ms)
        f = foragers[current]
        mine = sent_by[current]
        before = t
        while t < slice_end:  # a started step is finished (long version, §4.1)
            f, url = select_next(f, seed, params)
            if path_starts is not None and not f.path.visited:
                url = path_starts.start(url, t)
            page = site.page(url, t)
            step_t, rewarded = t, 0
            m.count_download(url, t, start)
            t += dl
            docs = [(url, page)]
            visited = set(f.path.visited)
            visited.add(url)
            links = []
            for link in page.links:
                if link in visited:
                    continue
                linked = site.page(link, t)
                m.count_download(link, t, start)
                t += dl
                links.append((link, linked.x))
                docs.append((link, linked))
            f = visit(f, url, page.x, links)
            reward = 0.0
            for doc_url, doc in docs:
                if not is_possibly_relevant(doc.published_ms, t, doc_url in mine, params):
                    continue
                mine.add(doc_url)
                m.sent += 1
                relevant, reinforcement = ra.judge(doc_url, doc, current, t)
                fleet = score_send(fleet, current, relevant, agent)
                reward += reinforcement
                if relevant:
                    rewarded += 1
                    m.relevant += 1
                    m.rewarded_at[doc_url] = t
                    m.bin_relevant[min(len(m.bin_relevant) - 1, (t - start) // BIN_MS)] += 1
            f = add_reward(f, reward)
            if path_starts is not None:
                path_starts.step(url, page.links, step_t, rewarded)
        foragers[current] = f
        fleet, decision, child = manage_forager(fleet, current, agent)
        if decision is Decision.MULTIPLY and child is not None:
            foragers[current], foragers[child] = multiply(f, child, seed, params)
            sent_by[child] = set()
        elif decision is Decision.DELETE:
            del foragers[current]
            del sent_by[current]
        m.population.append(len(fleet.foragers))
        current = next_forager(fleet, current)
        if progress is not None:
            progress(t - before)
    return m


def run_baseline(
    site: NewsSite, setup: ForagerSetup, progress: Progress | None = None
) -> FleetMetrics:
    """The fixed revisit schedule: home, then the topic's section pages, round robin."""
    hubs = [HOME, *(section_url(s) for s in site.sections if s in setup.topic)]
    ra = StoryJudge(site, setup.topic, setup.agent)
    m = FleetMetrics()
    downloaded: set[str] = set()
    t, k = site.start_ms, 0
    while t < site.end_ms:
        before = t
        hub = hubs[k % len(hubs)]
        k += 1
        page = site.page(hub, t)
        m.count_download(hub, t, site.start_ms)
        t += setup.download_ms
        for link in page.links:
            if link in downloaded or link in hubs:
                continue
            downloaded.add(link)
            doc = site.page(link, t)
            m.count_download(link, t, site.start_ms)
            t += setup.download_ms
            if not is_possibly_relevant(doc.published_ms, t, False, setup.params):
                continue
            m.sent += 1
            relevant, _ = ra.judge(link, doc, 0, t)
            if relevant:
                m.relevant += 1
                m.rewarded_at[link] = t
                m.bin_relevant[min(len(m.bin_relevant) - 1, (t - site.start_ms) // BIN_MS)] += 1
        if progress is not None:
            progress(t - before)
    return m


def build_site(setup: ForagerSetup, rewired: bool = False) -> NewsSite:
    stays = list(read_stays(setup.news))
    snaps = read_snapshot_times(setup.news)
    settings = replace(setup.site, rewired=rewired, dimensions=setup.params.dimensions)
    return NewsSite.build(stays, snaps, iso_ms(setup.start), setup.days, settings)
