"""Revisit policies on the news site in simulated time, at equal downloads.

A crawler downloads one page every `download_ms`, from a seed (the home page unless told
otherwise; the fixed schedule from its list). Each download is
either a page some revisit linked to and the crawl did not know (fetched once, judged by
the forager evaluation's agent: relevant when on topic, fresh and new), or a revisit
chosen by the policy, whose new links are fetched next. So every policy makes the same
downloads, and differs only in which page it revisits when no new link is waiting:

- `fixed`: the home page and the topic's section pages in a fixed round robin (the
  forager evaluation's baseline, `run_baseline`, download for download);
- `topic-sections`: the same without the home page (a reference: what watching only the
  pages that show nothing off the topic finds);
- `seed-only`: the seed at every revisit (a reference: what the learned policies do when
  they keep to the seed);
- `proportional`, `optimal-freshness`, `discovery`: every page the crawl has downloaded
  is a candidate; `state/revisits.py` keeps what its revisits saw and
  `state/revisit_budget.py` turns the estimates into frequencies every `plan_ms` — in
  proportion to the change rate, Cho & Garcia-Molina 2003 (TODS)'s optimal-freshness
  allocation, or in proportion to the square root of the rate of rewarded stories first
  found there (ours); the rates are learned while the schedule runs, the setting of
  Kolobov et al. 2019 (NeurIPS). The page due first is revisited next. Pages without an
  estimate, or given no revisits, are probed at doubling intervals while they stay
  unchanged (`probe_due_ms`), within an `exploration` share of the downloads; of the
  probes due, the page whose visits showed the most links new to the crawl goes first
  (`probe_value`). A probe only looks: the links it shows are fetched when a scheduled
  revisit shows them; until then those it showed first count for it at the crawl's hit
  rate (`discovery_rate`), as do those a page showed at its first download. With
  `skip_below`, links of a kind the judge seldom rewarded (`revisit_links`) wait until
  no revisit is due, and with `stale_ms` links first seen longer ago (when a revisit
  shows them, or a story's when its slot comes) are not fetched, whatever the policy;
  with `worth_ms`, the discovery rule's frequencies also weigh how long each page keeps
  a story listed and what the other pages catch, and with `floor_ms` revisit the hubs
  that list stories on the topic at least once per their stay or `floor_ms`
  (`revisit_listings`; a hub's link is then never stale);
- `live`: the live job's `--revisit learned` rule (`revisit_live_rule`, one revisit per
  download per host, valuing a hub by the links new to it, a story never revisited): the
  page due first is revisited once it is due, as a fetcher honours `not_before`; when
  none is and no link waits, the crawler waits for it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from frontierflow.pipelines.evaluation.forager_fleet import FleetMetrics, StoryJudge
from frontierflow.pipelines.evaluation.news_site import (
    DAY_MS,
    HOME,
    HOUR_MS,
    NewsSite,
    Page,
    section_url,
)
from frontierflow.pipelines.evaluation.revisit_agenda import RevisitAgenda
from frontierflow.pipelines.evaluation.revisit_links import LinkOdds
from frontierflow.pipelines.evaluation.revisit_listings import PageListings
from frontierflow.pipelines.evaluation.revisit_live_rule import LiveRevisitRule, live_policy
from frontierflow.pipelines.evaluation.revisit_policy import Policy, RevisitPolicySettings
from frontierflow.state.forager_agent import AgentParams
from frontierflow.state.foraging import ForagerParams, is_possibly_relevant
from frontierflow.state.revisit_budget import (
    due_ms,
    optimal_freshness_frequencies,
    proportional_frequencies,
    square_root_frequencies,
)
from frontierflow.state.revisits import (
    PageRevisits,
    change_rate,
    discovery_rate,
    first_visit,
    link_fetched,
    outlink_fingerprint,
    probe_due_ms,
    probe_value,
    record_visit,
    seen_link_fetched,
)

Progress = Callable[[int], None]
"""Called with simulated milliseconds advanced."""
COPY_STEP_MS = 15 * 60_000
"""How often the freshness of the crawl's copies of the hub pages is sampled."""


@dataclass(slots=True)
class RevisitMetrics:
    """One run: the forager evaluation's counters (relevant, sent, rewarded times, …), the
    kinds of downloads, and the copies' freshness samples."""

    fleet: FleetMetrics = field(default_factory=FleetMetrics)
    revisits: int = 0
    probes: int = 0
    fetches: int = 0
    copy_fresh: list[float] = field(default_factory=list)


def topic_hubs(site: NewsSite, topic: Sequence[str]) -> list[str]:
    """The fixed schedule's pages: the home page, then the topic's section pages."""
    return [HOME, *(section_url(s) for s in site.sections if s in topic)]


class RevisitCrawl:
    """The crawl's state in one run: what it downloaded, what waits, what is due when."""

    def __init__(
        self,
        site: NewsSite,
        topic: Sequence[str],
        policy: Policy,
        settings: RevisitPolicySettings,
        download_ms: int,
        measure_from_ms: int | None = None,
        seed: str = HOME,
    ) -> None:
        self.site = site
        self.seed = seed
        self.policy = policy
        self.settings = settings
        self.download_ms = download_ms
        self.judge = StoryJudge(site, topic, AgentParams())
        self.params = ForagerParams()
        self.m = RevisitMetrics()
        self.pages: dict[str, PageRevisits] = {}
        self.listings = PageListings()
        """What each page listed and how long its links stayed (`revisit_listings`)."""
        self.pending: deque[tuple[str, str]] = deque()
        """New links from the seed and the scheduled revisits, fetched before anything else."""
        self.skipped: deque[tuple[str, str]] = deque()
        """New links of a kind seldom rewarded, fetched when no revisit is due."""
        self.fetched_new = self.rewarded_new = 0
        """New links fetched, and of them rewarded, since the start (the hit rate)."""
        self.first_seen: dict[str, tuple[str, int]] = {}
        """The page each link was first seen on (by a revisit or a probe), and when."""
        self.hubs = [seed]
        if policy.has_list:
            self.hubs = topic_hubs(site, topic)[policy is Policy.TOPIC_SECTIONS :]
        self.known: set[str] = set(self.hubs)
        self.turn = 0
        self.frequency: dict[str, float] = {}
        self.agenda = RevisitAgenda()
        self.odds = LinkOdds(settings.skip_below)
        self.live = LiveRevisitRule(live_policy(download_ms)) if policy is Policy.LIVE else None
        """The live job's rule, for `Policy.LIVE`."""
        self.downloads = 0
        """Downloads since the start, warm-up included."""
        self.explored = 0
        """Downloads spent exploring: probes and the links they brought."""
        self.scheduled_revisits = 0
        """Revisits other than probes, and waiting links in slots they left, since the
        start (`_revisit_share`)."""
        self._budget_marks: deque[tuple[int, int, int]] = deque()
        self.next_plan = site.start_ms
        self._fingerprints: dict[tuple[str, ...], int] = {}
        self._copy_hubs = [HOME, *(section_url(s) for s in site.sections)]
        self.measure_from = site.start_ms if measure_from_ms is None else measure_from_ms
        """Counting starts here: the crawl before it is a warm-up (its state is kept)."""
        self.next_copy_sample = self.measure_from
        self._measuring = self.measure_from <= site.start_ms

    # -- one download --------------------------------------------------------------------

    def step(self, t: int) -> int:
        """Makes the download starting at `t`; returns when it is complete."""
        if not self._measuring and t >= self.measure_from:
            # the agent keeps what it rewarded in the warm-up (freshness counts it)
            rewarded = self.m.fleet.rewarded_at
            self.m = RevisitMetrics()
            self.m.fleet.rewarded_at.update(rewarded)
            self._measuring = True
        self._sample_copies(t)
        if self.policy.learns and t >= self.next_plan:
            self._plan(t)
            self.next_plan = t + self.settings.plan_ms
        if (link := self._next_waiting(self.pending, t)) is not None:
            return self._fetch(*link, t, exploring=False)
        if self.live is not None:
            return self._live_slot(t)
        if not self.policy.learns:
            url = self.hubs[self.turn % len(self.hubs)]
            self.turn += 1
            return self._revisit(url, t, exploring=False)
        return self._explore_or_revisit(t)

    def _explore_or_revisit(self, t: int) -> int:
        """A probe that is due while probes are within their share of the downloads; else
        the scheduled page due first if it is due; else a link skipped for its kind (a slot
        no revisit needs); else that page, even if not yet due (every download slot is
        used); else, before any page has a frequency, the seed."""
        if self.explored < self.settings.exploration * max(1, self.downloads):
            # the page whose probe may show the most links new to the crawl
            probe = self.agenda.next_probe(t, lambda url: probe_value(self.pages[url]))
            if probe is not None:
                return self._revisit(probe, t, exploring=True)
        due = self.agenda.first_due()
        if (due is None or due > t) and (link := self._next_waiting(self.skipped, t)):
            self.scheduled_revisits += 1  # a slot the revisits left: still their budget
            return self._fetch(*link, t, exploring=False)
        url = self.agenda.pop_due()
        return self._revisit(self.seed if url is None else url, t, exploring=False)

    def _live_slot(self, t: int) -> int:
        """The live rule: the page due first once it is due; else a link skipped for its
        kind; else, before any page is scheduled, the seed; else the crawler waits until
        the first page is due (a fetcher holds an entry until its `not_before`)."""
        due = self.agenda.first_due()
        if due is not None and due <= t:
            return self._revisit(self.agenda.pop_due() or self.seed, t, exploring=False)
        if self.skipped:
            self.scheduled_revisits += 1
            return self._fetch(*self.skipped.popleft(), t, exploring=False)
        if due is None:
            return self._revisit(self.seed, t, exploring=False)
        return due

    def _live_download(self, url: str, page: Page, t: int) -> None:
        """A download through the live rule: the page is next due when it says."""
        if self.live is None:
            return
        due = self.live.download(url, page.links, t, page.published_ms)
        if due is not None:
            self.agenda.schedule_due(url, due)

    def _fetch(self, url: str, via: str, t: int, exploring: bool) -> int:
        """Downloads a new link (judged; credited to the page whose revisit brought it)."""
        page = self.site.page(url, t)
        self._count(url, t, exploring)
        self.m.fetches += 1
        done = t + self.download_ms
        unseen = self._first_seen_at(url, page.links, t)
        self.pages[url] = first_visit(t, self._fingerprint(page.links), len(unseen))
        self.listings.visit(url, t, page.links, hub=page.published_ms is None)
        self._live_download(url, page, t)
        if self.policy.learns:
            self._schedule_probe(url)
        rewarded = False
        if is_possibly_relevant(page.published_ms, done, False, self.params):
            fm = self.m.fleet
            fm.sent += 1
            rewarded, _ = self.judge.judge(url, page, 0, done)
            if rewarded:
                fm.relevant += 1
                fm.rewarded_at[url] = done
                fm.bin_relevant[-1] += 1
        self.fetched_new += 1
        self.rewarded_new += rewarded
        self.odds.judged(url, rewarded)
        if via in self.pages:
            self.pages[via] = link_fetched(self.pages[via], rewarded)
        first, seen_at = self.first_seen.get(url, ("", 0))
        if first in self.pages and self.pages[first].last_visit_ms == seen_at:
            self.pages[first] = seen_link_fetched(self.pages[first])
        return done

    def _revisit(self, url: str, t: int, exploring: bool) -> int:
        """Downloads a page again: a scheduled revisit queues its links the crawl has not
        fetched; a probe only looks (what it shows is remembered as first seen there, and
        fetched when a scheduled revisit shows it), so a probe costs one download."""
        page = self.site.page(url, t)
        self._count(url, t, exploring)
        fp = self._fingerprint(page.links)
        links = dict.fromkeys(page.links)
        unseen = self._first_seen_at(url, links, t)
        old = self.pages.get(url)
        if old is None:
            self.pages[url] = first_visit(t, fp, len(unseen))
        else:
            self.pages[url] = record_visit(old, t, fp, len(unseen), self.settings.revisit)
            self.m.revisits += 1
        self.listings.visit(url, t, page.links, hub=page.published_ms is None)
        if not exploring:
            for link in links:
                if link not in self.known:
                    self.known.add(link)
                    if self._stale(link, t):
                        continue
                    wait = self.pending if self.odds.worth(link) else self.skipped
                    wait.append((link, url))
        if exploring:
            self.m.probes += 1
        else:
            self.scheduled_revisits += 1
        self._live_download(url, page, t)
        if self.policy.learns:
            due = due_ms(t, self.frequency.get(url, 0.0))
            if due is not None:
                self.agenda.schedule_due(url, due)
            else:
                self._schedule_probe(url)
        return t + self.download_ms

    def _stale(self, link: str, t: int, waited: bool = False) -> bool:
        """Whether a link was first seen more than `stale_ms` before `t` (a story listed
        that long is at least that old); never when `stale_ms` is 0, nor for a hub's link
        (in a listing page's folder: it has no age) with `floor_ms` or once it `waited`."""
        s = self.settings
        if (waited or s.floor_ms > 0) and self.listings.in_hub_folder(link):
            return False
        return s.stale_ms > 0 and t - self.first_seen.get(link, ("", t))[1] > s.stale_ms

    def _next_waiting(self, queue: deque[tuple[str, str]], t: int) -> tuple[str, str] | None:
        """The next link of `queue` and the page that showed it; a story's link gone stale
        while it waited is dropped (it ages as it waits, so `stale_ms` holds at its slot)."""
        while queue:
            link = queue.popleft()
            if not self._stale(link[0], t, waited=True):
                return link
        return None

    def _first_seen_at(self, url: str, links: Iterable[str], t: int) -> list[str]:
        """The links the crawl neither knows nor has seen before, now seen first on `url`."""
        seen = self.first_seen
        unseen = [u for u in dict.fromkeys(links) if u not in self.known and u not in seen]
        for link in unseen:
            self.first_seen[link] = (url, t)
        return unseen

    def _count(self, url: str, t: int, exploring: bool) -> None:
        start = self.measure_from if self._measuring else self.site.start_ms
        self.m.fleet.count_download(url, t, start)
        self.downloads += 1
        self.explored += exploring

    def _fingerprint(self, links: tuple[str, ...]) -> int:
        if (fp := self._fingerprints.get(links)) is None:
            fp = self._fingerprints[links] = outlink_fingerprint(links)
        return fp

    # -- which page to revisit -------------------------------------------------------------

    def _plan(self, t: int) -> None:
        """Frequencies for every page with an estimate, from the policy's rule, under the
        budget of revisit downloads the last plan's share of downloads leaves."""
        s = self.settings
        share = {
            Policy.PROPORTIONAL: proportional_frequencies,
            Policy.OPTIMAL_FRESHNESS: optimal_freshness_frequencies,
            Policy.DISCOVERY: square_root_frequencies,
        }[self.policy]
        rates = {}
        watched = []
        # the share of rewarded stories among the new links fetched (Laplace's rule)
        hit_rate = (self.rewarded_new + 1) / (self.fetched_new + 2)
        for url, page in self.pages.items():
            if self.policy is Policy.DISCOVERY:
                rate = discovery_rate(page, s.revisit, hit_rate)
            else:
                rate = change_rate(page, s.revisit)
            if rate is not None and rate > 0:
                rates[url] = rate
            elif rate is not None:
                watched.append(url)
        budget = self._revisit_share(t) / self.download_ms
        if self.policy is Policy.DISCOVERY and s.worth_ms > 0:
            on_topic = self.odds.rewarded_share
            floors = self.listings.floors(self.listings.hubs, on_topic, s.skip_below, s.floor_ms)
            self.frequency = self.listings.frequencies(
                self.pages,
                [*rates, *watched],
                self.frequency,
                lambda link, seen_ms: self._worth(link, t - seen_ms),
                budget,
                s.worth_ms,
                floors,
            )
        else:
            self.frequency = share(rates, budget)
        self.agenda.clear()
        for url, page in self.pages.items():
            freq = self.frequency.get(url, 0.0)
            due = due_ms(page.last_visit_ms, freq)
            if due is not None:
                self.agenda.schedule_due(url, due)
            else:
                self._schedule_probe(url)

    def _worth(self, link: str, age_ms: int) -> float:
        """A story's worth to the discovery rule with listing lifetimes: 1 when rewarded, 0
        when fetched and not, its kind's odds when not fetched yet; weighed down by its age
        with the record's half-life."""
        if link in self.m.fleet.rewarded_at:
            worth = 1.0
        elif link in self.pages:
            return 0.0
        else:
            worth = self.odds.hit_rate(link)
        half = self.settings.revisit.half_life_ms
        return worth if half is None else worth * 0.5 ** (age_ms / half)

    def _revisit_share(self, t: int) -> float:
        """The budget: the share of the last day's downloads that were revisits other than
        probes (the rest went to new links and exploration); 1 − exploration at first."""
        marks = self._budget_marks
        marks.append((t, self.downloads, self.scheduled_revisits))
        while len(marks) > 2 and marks[1][0] <= t - DAY_MS:
            marks.popleft()
        downloads = marks[-1][1] - marks[0][1]
        if downloads <= 0:
            return 1.0 - self.settings.exploration
        return max(0.05, (marks[-1][2] - marks[0][2]) / downloads)

    def _schedule_probe(self, url: str) -> None:
        self.agenda.schedule_probe(url, probe_due_ms(self.pages[url], self.settings.revisit))

    # -- the copies' freshness --------------------------------------------------------------

    def _sample_copies(self, t: int) -> None:
        """Every `COPY_STEP_MS`: the share of the site's hub pages (home and every section
        page) whose last downloaded version is the version in force (never downloaded:
        not fresh)."""
        while self._measuring and self.next_copy_sample <= t:
            s = self.next_copy_sample
            fresh = 0
            for url in self._copy_hubs:
                page = self.pages.get(url)
                if page is not None:
                    live = self._fingerprint(self.site.links(url, s))
                    fresh += page.fingerprint == live
            self.m.copy_fresh.append(fresh / len(self._copy_hubs))
            self.next_copy_sample = s + COPY_STEP_MS


def run_revisits(
    site: NewsSite,
    topic: Sequence[str],
    policy: Policy,
    download_ms: int,
    settings: RevisitPolicySettings | None = None,
    measure_from_ms: int | None = None,
    seed: str = HOME,
    progress: Progress | None = None,
) -> RevisitMetrics:
    """One run of `policy` over the whole site, one download every `download_ms`, counted
    from `measure_from_ms` (default: the start); the learned policies start from `seed`."""
    if policy.is_fleet:
        raise ValueError(f"{policy.value} is a fleet (revisit_fleet.run_fleet_revisits)")
    s = settings or RevisitPolicySettings()
    crawl = RevisitCrawl(site, topic, policy, s, download_ms, measure_from_ms, seed)
    t = reported = site.start_ms
    while t < site.end_ms:
        t = crawl.step(t)
        if progress is not None and t - reported >= HOUR_MS:
            progress(t - reported)
            reported = t
    if progress is not None:
        progress(t - reported)
    return crawl.m
