"""Seed 004's evaluation: a forager fleet hunting new stories on a news site, closed loop.

The fleet (state/forager.py) and the reinforcing agent (state/forager_agent.py) run in
simulated real time over `NewsSite`: the RA gives each forager a time slice in turn; in
each step a forager downloads the page it chose and every page it links to (seed 002: it
must download a page to know its x), sends the possibly relevant ones (not older than 24 h,
not sent by it before) to the RA, and learns from the reinforcements. Every download takes
`download_ms` of simulated time. After each slice the RA multiplies or deletes the forager.

Metrics (seed 004, Fig. 1(a)); the seed's definitions were lost, these are ours where noted:
- downloaded: page downloads; sent: documents sent to the RA; relevant: documents the RA
  rewarded (on topic, new to the RA, not older than 24 h); found URLs: distinct URLs
  downloaded;
- download efficiency = relevant / downloaded; sent efficiency = relevant / sent;
  exploration = found URLs / downloaded (both match seed 004's table arithmetic);
- age (ours): mean hours from a relevant story's publication to its reward (stories
  published during the run; older ones would count the time before the run started);
- freshness (ours, after Cho & Garcia-Molina): the share of on-topic stories published in
  the last 24 h that the RA already holds, averaged over the run every 15 minutes.
A baseline that ignores learning revisits the home page and the topic's section pages in
a fixed round robin, downloads each linked page it has not downloaded before and sends
what is fresh.
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from frontierflow.connectors.news import iso_ms, read_snapshot_times, read_stays
from frontierflow.pipelines.evaluation.news_graph import GraphMeasures, measure, site_graph
from frontierflow.pipelines.evaluation.news_site import (
    DAY_MS,
    HOME,
    HOUR_MS,
    NewsSite,
    Page,
    SiteSettings,
    section_url,
)
from frontierflow.pipelines.evaluation.plotting import headless_pyplot
from frontierflow.state.forager import (
    ForagerParams,
    ForagerState,
    Variant,
    add_reward,
    is_possibly_relevant,
    multiply,
    new_forager,
    select_next,
    visit,
)
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

log = logging.getLogger(__name__)

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
"""Seed 004 Fig. 1(b): download efficiency in 3-hour intervals."""
FRESHNESS_STEP_MS = 15 * 60_000

Progress = Callable[[int], None]
"""Called with simulated milliseconds advanced."""


@dataclass(frozen=True, slots=True)
class ForagerSetup:
    news: Path
    start: str = DEFAULT_START
    days: float = 8.0
    """Seed 004's Fig. 1(b) spans 8 days."""
    topic: tuple[str, ...] = WORLD_NEWS
    download_ms: int = DEFAULT_DOWNLOAD_MS
    """Ours: one page every 10 s, a common crawl delay for a single host. Seed 004's fleets
    downloaded 540–670k pages in 8 days (≈1.3 s a page) from a far larger site; at that rate
    this site (≈50 new stories a day) is downloaded whole every few minutes and every
    variant saturates (docs/FORAGERS.md shows both)."""
    params: ForagerParams = field(default_factory=ForagerParams)
    agent: AgentParams = field(default_factory=AgentParams)
    site: SiteSettings = field(default_factory=SiteSettings)


@dataclass(slots=True)
class RunMetrics:
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


@dataclass(frozen=True, slots=True)
class RunResult:
    site: str
    variant: str
    run: int
    downloaded: int
    sent: int
    relevant: int
    found_urls: int
    download_efficiency: float
    sent_efficiency: float
    exploration: float
    freshness: float
    age_hours: float
    final_population: int
    efficiency_series: tuple[float, ...]


TABLE_ROWS = (
    ("downloaded", "downloaded", "{:.0f}"),
    ("sent", "sent", "{:.0f}"),
    ("relevant", "relevant", "{:.0f}"),
    ("found URLs", "found_urls", "{:.0f}"),
    ("download eff", "download_efficiency", "{:.4f}"),
    ("sent eff", "sent_efficiency", "{:.3f}"),
    ("exploration", "exploration", "{:.3f}"),
    ("freshness", "freshness", "{:.3f}"),
    ("age (hours)", "age_hours", "{:.2f}"),
)


class Judge:
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


def run_fleet(
    site: NewsSite,
    setup: ForagerSetup,
    variant: Variant,
    seed: int,
    progress: Progress | None = None,
) -> RunMetrics:
    """One closed-loop run of a fleet of `variant` foragers (see the module docstring)."""
    params, agent = setup.params, setup.agent
    start, end, dl = site.start_ms, site.end_ms, setup.download_ms
    seeds = site.seeds(params.start_list)
    fleet = new_fleet(agent)
    foragers: dict[int, ForagerState] = {
        i: new_forager(i, variant, seeds, seed, params) for i in fleet.foragers
    }
    sent_by: dict[int, set[str]] = {i: set() for i in fleet.foragers}
    ra = Judge(site, setup.topic, agent)
    m = RunMetrics()
    t = start
    current = next_forager(fleet, None)
    while t < end:
        slice_end = min(end, t + agent.time_slice_ms)
        f = foragers[current]
        mine = sent_by[current]
        before = t
        while t < slice_end:  # a started step is finished (seed 002 §4.1)
            f, url = select_next(f, seed, params)
            page = site.page(url, t)
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
                    m.relevant += 1
                    m.rewarded_at[doc_url] = t
                    m.bin_relevant[min(len(m.bin_relevant) - 1, (t - start) // BIN_MS)] += 1
            f = add_reward(f, reward)
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
) -> RunMetrics:
    """The fixed revisit schedule: home, then the topic's section pages, round robin."""
    hubs = [HOME, *(section_url(s) for s in site.sections if s in setup.topic)]
    ra = Judge(site, setup.topic, setup.agent)
    m = RunMetrics()
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


def freshness_and_age(site: NewsSite, topic: Sequence[str], m: RunMetrics) -> tuple[float, float]:
    """Freshness (share of the last 24 h's on-topic stories already rewarded, averaged every
    15 minutes) and age (mean hours from publication to reward); see the module docstring."""
    wanted = frozenset(topic)
    pubs = []
    found = []
    for url, story in site.stories.items():
        if story.section in wanted:
            pubs.append(story.published_ms)
            found.append(m.rewarded_at.get(url, math.inf))
    pub = np.array(pubs, dtype=float)
    got = np.array(found, dtype=float)
    shares = []
    for s in range(site.start_ms, site.end_ms + 1, FRESHNESS_STEP_MS):
        live = (pub > s - DAY_MS) & (pub <= s)
        if live.any():
            shares.append(float(np.mean(got[live] <= s)))
    ages = [
        (t - site.stories[u].published_ms) / HOUR_MS
        for u, t in m.rewarded_at.items()
        if u in site.stories and site.stories[u].published_ms >= site.start_ms
    ]
    freshness = float(np.mean(shares)) if shares else 0.0
    return freshness, float(np.mean(ages)) if ages else math.nan


def summarise(
    site: NewsSite, setup: ForagerSetup, site_name: str, variant: str, run: int, m: RunMetrics
) -> RunResult:
    freshness, age = freshness_and_age(site, setup.topic, m)
    series = tuple(
        r / d if d else 0.0 for r, d in zip(m.bin_relevant, m.bin_downloads, strict=True)
    )
    return RunResult(
        site=site_name,
        variant=variant,
        run=run,
        downloaded=m.downloaded,
        sent=m.sent,
        relevant=m.relevant,
        found_urls=len(m.found),
        download_efficiency=m.relevant / max(1, m.downloaded),
        sent_efficiency=m.relevant / max(1, m.sent),
        exploration=len(m.found) / max(1, m.downloaded),
        freshness=freshness,
        age_hours=age,
        final_population=m.population[-1] if m.population else 1,
        efficiency_series=series,
    )


def build_site(setup: ForagerSetup, rewired: bool = False) -> NewsSite:
    stays = list(read_stays(setup.news))
    snaps = read_snapshot_times(setup.news)
    settings = replace(setup.site, rewired=rewired, dimensions=setup.params.dimensions)
    return NewsSite.build(stays, snaps, iso_ms(setup.start), setup.days, settings)


def evaluate(
    setup: ForagerSetup,
    variants: Sequence[str],
    runs: int,
    rewired: bool = True,
    baseline: bool = True,
    progress: Progress | None = None,
) -> tuple[list[RunResult], dict[str, GraphMeasures]]:
    """Every variant `runs` times on the site (and on its rewired copy), plus the baseline."""
    results: list[RunResult] = []
    graphs: dict[str, GraphMeasures] = {}
    sites = [("sfsw", False), ("rewired", True)] if rewired else [("sfsw", False)]
    for site_name, rewire in sites:
        site = build_site(setup, rewire)
        graphs[site_name] = measure(site_graph(site, site.end_ms))
        for name in variants:
            variant = Variant(name)
            for run in range(runs):
                m = run_fleet(site, setup, variant, seed=run, progress=progress)
                results.append(summarise(site, setup, site_name, variant.value, run, m))
                r = results[-1]
                log.info(
                    "%s %s run %d: %d relevant of %d sent, %d downloaded",
                    site_name, name, run, r.relevant, r.sent, r.downloaded,
                )  # fmt: skip
        if baseline:
            m = run_baseline(site, setup, progress)
            results.append(summarise(site, setup, site_name, "baseline", 0, m))
    return results, graphs


# --- reports -----------------------------------------------------------------------------


def _stats(rows: Sequence[RunResult], attr: str) -> tuple[float, float]:
    values = np.array([float(getattr(r, attr)) for r in rows])
    return float(values.mean()), float(values.std(ddof=1)) if len(values) > 1 else 0.0


def summary_table(results: Sequence[RunResult], site_name: str) -> list[str]:
    groups: dict[str, list[RunResult]] = {}
    for r in results:
        if r.site == site_name:
            groups.setdefault(r.variant, []).append(r)
    names = list(groups)
    head = "| type | " + " | ".join(f"{n.upper()} | std {n.upper()}" for n in names) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(names)]
    for label, attr, fmt in TABLE_ROWS:
        cells = []
        for n in names:
            mean, std = _stats(groups[n], attr)
            cells += [fmt.format(mean), fmt.format(std)]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def write_reports(
    out: Path, setup: ForagerSetup, results: Sequence[RunResult], graphs: dict[str, GraphMeasures]
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "runs.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["site", "variant", "run", *(attr for _, attr, _ in TABLE_ROWS), "population"])
        for r in results:
            values = (getattr(r, a) for _, a, _ in TABLE_ROWS)
            w.writerow([r.site, r.variant, r.run, *values, r.final_population])
    with (out / "efficiency.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["site", "variant", "run", "hours", "download_efficiency"])
        for r in results:
            for i, e in enumerate(r.efficiency_series):
                w.writerow([r.site, r.variant, r.run, 3 * (i + 1), f"{e:.6f}"])
    lines = [
        "# Forager fleets on the news site (seed 004's table)",
        "",
        f"- start {setup.start}, {setup.days:g} days, download {setup.download_ms} ms a page",
        f"- topic: {', '.join(setup.topic)}",
        "",
    ]
    for site_name in dict.fromkeys(r.site for r in results):
        lines += [f"## {site_name}", "", *summary_table(results, site_name), ""]
    lines += ["## Link graph at the end of the run", ""]
    lines += [
        "| site | nodes | edges | mean out | max in | in α (k_min) | out α (k_min) "
        "| clustering | random C | path length | random L |",
        "|---|" + "---:|" * 10,
    ]
    for name, g in graphs.items():
        lines.append(
            f"| {name} | {g.nodes} | {g.edges} | {g.mean_out_degree:.1f} | {g.max_in_degree} "
            f"| {g.in_exponent:.2f} ({g.in_kmin}) | {g.out_exponent:.2f} ({g.out_kmin}) "
            f"| {g.clustering:.3f} | {g.random_clustering:.4f} | {g.path_length:.2f} "
            f"| {g.random_path_length:.2f} |"
        )
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    plot_efficiency(out / "efficiency.png", results)


def plot_efficiency(path: Path, results: Sequence[RunResult]) -> None:
    """Seed 004 Fig. 1(b): download efficiency in 3-hour intervals, one line per run."""
    plt = headless_pyplot()

    panels = [v for v in dict.fromkeys(r.variant for r in results if r.site == "sfsw")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.2 * len(panels)), sharex=True)
    axes_list = list(np.atleast_1d(axes))
    for ax, variant in zip(axes_list, panels, strict=True):
        for r in results:
            if r.site == "sfsw" and r.variant == variant:
                days = [3 * (i + 1) / 24 for i in range(len(r.efficiency_series))]
                ax.plot(days, r.efficiency_series, linewidth=1.0, label=f"run {r.run}")
        ax.set_ylabel(variant.upper())
        ax.grid(alpha=0.3)
    axes_list[-1].set_xlabel("days")
    fig.suptitle("download efficiency (relevant / downloaded) per 3 hours")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --- command line ------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `frontierflow simulate-foragers`."""
    parser.add_argument("--news", type=Path, default=Path("../shared/data/news"))
    parser.add_argument("--variants", default="wl,rl,wlrl", help="wl, rl, wlrl")
    parser.add_argument("--days", type=float, default=8.0)
    parser.add_argument("--start", default=DEFAULT_START, help="ISO 8601 UTC start")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--download-ms", type=int, default=DEFAULT_DOWNLOAD_MS)
    parser.add_argument("--topic", default=",".join(WORLD_NEWS), help="sections, comma-separated")
    parser.add_argument("--no-rewired", action="store_true", help="skip the rewired site")
    parser.add_argument("--no-baseline", action="store_true", help="skip the fixed schedule")
    parser.add_argument("--out", type=Path, required=True, help="output directory")


def run_from_args(args: argparse.Namespace, progress: Progress | None = None) -> int:
    """Runs the evaluation the options describe and writes runs.csv, efficiency.csv,
    summary.md and efficiency.png to `--out`."""
    setup = ForagerSetup(
        news=args.news,
        start=args.start,
        days=args.days,
        topic=tuple(t.strip() for t in args.topic.split(",") if t.strip()),
        download_ms=args.download_ms,
    )
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        Variant(v)  # ValueError for an unknown variant, before any work
    results, graphs = evaluate(
        setup, variants, args.runs, not args.no_rewired, not args.no_baseline, progress
    )
    write_reports(args.out, setup, results, graphs)
    return 0


def total_simulated_ms(args: argparse.Namespace) -> int:
    """Simulated time the evaluation will cover (for a progress bar)."""
    variants = len([v for v in args.variants.split(",") if v.strip()])
    sites = 1 if args.no_rewired else 2
    runs = variants * args.runs + (0 if args.no_baseline else 1)
    return int(sites * runs * args.days * DAY_MS)
