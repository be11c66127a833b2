"""The revisit policies on the news site: a synthetic recording in seconds, a day of the real
one, and the report windows at one rate (slow)."""

from __future__ import annotations

import csv
from collections import deque
from pathlib import Path

import pytest
from news_recording import write_recording

from frontierflow.connectors.news import iso_ms
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup, build_site, run_baseline
from frontierflow.pipelines.evaluation.news_site import HOME, section_url
from frontierflow.pipelines.evaluation.revisit_constants import (
    TUNED,
    describe,
    tuned_constants,
    with_constants,
)
from frontierflow.pipelines.evaluation.revisit_eval import (
    REPORT_STARTS,
    TUNING_END,
    RevisitEvaluation,
)
from frontierflow.pipelines.evaluation.revisit_policy import (
    REVISIT_POLICIES,
    Policy,
    RevisitPolicySettings,
)
from frontierflow.pipelines.evaluation.revisits import (
    RevisitCrawl,
    RevisitMetrics,
    run_revisits,
    topic_hubs,
)
from frontierflow.state.revisit_lifetimes import listing_rate
from frontierflow.state.revisits import HOUR_MS

LEARNED = [Policy.PROPORTIONAL, Policy.OPTIMAL_FRESHNESS, Policy.DISCOVERY]


@pytest.fixture
def setup(tmp_path: Path) -> ForagerSetup:
    write_recording(tmp_path)
    return ForagerSetup(news=tmp_path, start="2022-03-01T06:00:00Z", days=1.0, topic=("Europe",))


def test_the_fixed_schedule_is_the_forager_baseline(setup: ForagerSetup) -> None:
    """Download for download: the same pages at the same times, the same rewards."""
    site = build_site(setup)
    baseline = run_baseline(site, setup)
    m = run_revisits(site, setup.topic, Policy.FIXED, setup.download_ms).fleet
    assert (m.downloaded, m.sent, m.relevant) == (8_640, 58, 20)  # one page every 10 s
    assert (baseline.downloaded, baseline.sent, baseline.relevant) == (8_640, 58, 20)
    assert m.rewarded_at == baseline.rewarded_at and m.found == baseline.found
    assert m.bin_downloads == baseline.bin_downloads


@pytest.mark.parametrize("policy", REVISIT_POLICIES)
def test_every_policy_makes_the_same_downloads(setup: ForagerSetup, policy: Policy) -> None:
    """24 h at one page a minute is 1,440 downloads, each a new link, a first visit of a
    page the schedule starts from (the fixed list, or the seed) or a revisit."""
    site = build_site(setup)
    m = run_revisits(site, setup.topic, policy, 60_000)
    starts = 1
    if policy.has_list:
        starts = len(topic_hubs(site, setup.topic)) - (policy is Policy.TOPIC_SECTIONS)
    assert m.fleet.downloaded == 1_440
    assert m.fetches + m.revisits + starts == 1_440
    assert 0 < m.fleet.relevant <= m.fleet.sent <= m.fetches
    assert len(m.copy_fresh) == 96  # every 15 minutes


def test_links_of_a_kind_seldom_rewarded_wait(setup: ForagerSetup) -> None:
    """Every story of the recording is one kind (news/s-). Unjudged, its odds are
    (0 + 1) / (0 + 2) = 0.5: under a bar of 0.6 every link waits, and the fixed list, which
    always has a page to revisit, downloads none; under 0.5 the first is downloaded, and the
    next only if it was rewarded."""
    site = build_site(setup)
    never = RevisitPolicySettings(skip_below=0.6)
    m = run_revisits(site, setup.topic, Policy.FIXED, 60_000, never)
    starts = len(topic_hubs(site, setup.topic))
    assert (m.fetches, m.fleet.sent, m.revisits + starts) == (0, 0, 1_440)
    every = run_revisits(site, setup.topic, Policy.FIXED, 60_000)
    assert every.fetches > 2
    once = run_revisits(
        site, setup.topic, Policy.FIXED, 60_000, RevisitPolicySettings(skip_below=0.5)
    )
    assert 1 <= once.fetches < every.fetches


def test_a_waiting_link_takes_only_a_slot_no_revisit_is_due_for(setup: ForagerSetup) -> None:
    """The discovery rule with every link waiting: a link is downloaded only at a step where
    no page is due (checked at every step but the hourly plans, which move the due times)."""
    site = build_site(setup)
    settings = RevisitPolicySettings(skip_below=0.6)
    crawl = RevisitCrawl(site, setup.topic, Policy.DISCOVERY, settings, 60_000)
    t, fetched = site.start_ms, 0
    while t < site.end_ms:
        due, waiting, pending = crawl.agenda.first_due(), len(crawl.skipped), len(crawl.pending)
        fetches, planning = crawl.m.fetches, t >= crawl.next_plan  # a plan moves every due
        t_next = crawl.step(t)
        if crawl.m.fetches > fetches:
            fetched += 1
            assert pending == 0 and waiting > 0
            assert planning or due is None or due > t
        t = t_next
    assert fetched == crawl.m.fetches > 0


@pytest.mark.parametrize("exploration", [0.0, 0.05, 0.3])
def test_exploration_keeps_to_its_share(setup: ForagerSetup, exploration: float) -> None:
    """Probes and the links they bring take at most the share (one download over it at
    most: the share is checked before each exploring download)."""
    site = build_site(setup)
    settings = RevisitPolicySettings(exploration=exploration)
    crawl = RevisitCrawl(site, setup.topic, Policy.DISCOVERY, settings, 60_000)
    t = site.start_ms
    while t < site.end_ms:
        t = crawl.step(t)
        assert crawl.explored <= exploration * crawl.downloads + 1
    assert (crawl.m.probes > 0) == (exploration > 0)


def test_the_discovery_rule_learns_where_new_stories_appear(setup: ForagerSetup) -> None:
    """Every story of the recording is on the home page from its first appearance; the
    topic's section page shows the same stories of its section. The home page, revisited
    first, is credited with most of them and gets most of the budget."""
    site = build_site(setup)
    crawl = RevisitCrawl(site, setup.topic, Policy.DISCOVERY, RevisitPolicySettings(), 60_000)
    t = site.start_ms
    while t < site.end_ms:
        t = crawl.step(t)
    frequencies = crawl.frequency
    assert max(frequencies, key=frequencies.__getitem__) == HOME
    assert frequencies[HOME] > 0.5 * sum(frequencies.values())
    home = crawl.pages[HOME]
    assert home.revisits > 0.5 * crawl.m.revisits and home.relevant > 0


def test_the_discovery_rule_with_listing_lifetimes_learns_them(setup: ForagerSetup) -> None:
    """With `worth_ms`, the frequencies come from `listing_frequencies`. On the synthetic
    site the topic's stories are listed on the home page and on the Europe section page,
    which keeps them longer (its ten latest): the budget goes to those two only, and the
    section's links were measured to leave more slowly than the home page's."""
    site = build_site(setup)
    settings = RevisitPolicySettings(worth_ms=4 * HOUR_MS)
    crawl = RevisitCrawl(site, setup.topic, Policy.DISCOVERY, settings, 60_000)
    t = site.start_ms
    while t < site.end_ms:
        t = crawl.step(t)
    europe = section_url("Europe")
    assert {url for url, f in crawl.frequency.items() if f > 0} == {HOME, europe}
    home, section = (listing_rate(crawl.listings.listings[url]) for url in (HOME, europe))
    assert home is not None and section is not None and 0 < section < home
    assert crawl.m.fleet.relevant > 0


def test_links_first_seen_long_ago_are_not_fetched(setup: ForagerSetup) -> None:
    """With `stale_ms` 1 h, a revisit of the home page 2 h in does not queue the links a
    probe saw first at the start (they are at least 2 h old); without it, it queues them."""
    site = build_site(setup)
    for stale_ms, queued in ((HOUR_MS, False), (0, True)):
        settings = RevisitPolicySettings(stale_ms=stale_ms)
        crawl = RevisitCrawl(site, setup.topic, Policy.DISCOVERY, settings, 60_000)
        start = site.start_ms
        crawl._revisit(HOME, start, exploring=True)  # a probe: it only looks
        assert not crawl.pending and crawl.first_seen
        crawl._revisit(HOME, start + 2 * HOUR_MS, exploring=False)
        old = {link for link, (_, seen) in crawl.first_seen.items() if seen == start}
        assert bool(old & {link for link, _ in crawl.pending}) is queued


def test_a_story_that_waited_until_stale_is_not_fetched(setup: ForagerSetup) -> None:
    """With `stale_ms` 1 h, a story's link that a revisit of the home page queued at the
    start and that still waits 2 h later is dropped at its slot (the story is now at least
    2 h old) and the next link is fetched: a section page's, which has no age once a page
    of its folder was downloaded. Without `stale_ms`, the story is fetched."""
    site = build_site(setup)
    start = site.start_ms
    links = site.page(HOME, start).links
    story = next(u for u in links if u in site.stories)
    europe, other = (
        section_url("Europe"),
        next(u for u in links if u.startswith(f"{HOME}sections/") and u != section_url("Europe")),
    )
    for stale_ms, fetched in ((HOUR_MS, europe), (0, story)):
        settings = RevisitPolicySettings(stale_ms=stale_ms)
        crawl = RevisitCrawl(site, setup.topic, Policy.DISCOVERY, settings, 60_000)
        crawl._revisit(HOME, start, exploring=False)  # every link first seen at the start
        crawl._fetch(other, HOME, start + 60_000, exploring=False)  # a section page: a hub
        crawl.pending = deque([(story, HOME), (europe, HOME)])
        crawl.step(start + 2 * HOUR_MS)
        assert fetched in crawl.pages and (story in crawl.pages) is (stale_ms == 0)
        assert len(crawl.pending) == (1 if stale_ms == 0 else 0)
        crawl.skipped = deque([(story, HOME)])  # a slot no revisit needs drops it too
        assert crawl._next_waiting(crawl.skipped, start + 2 * HOUR_MS) == (
            None if stale_ms else (story, HOME)
        )


def test_with_a_floor_listing_pages_are_never_stale(setup: ForagerSetup) -> None:
    """With `stale_ms` 1 h and `floor_ms`, once a section page was downloaded (a page with
    no publication time), a revisit of the home page 2 h after a probe queues the other
    section pages the probe saw (their folder lists), and still not the stories it saw."""
    site = build_site(setup)
    settings = RevisitPolicySettings(stale_ms=HOUR_MS, worth_ms=HOUR_MS, floor_ms=24 * HOUR_MS)
    crawl = RevisitCrawl(site, setup.topic, Policy.DISCOVERY, settings, 60_000)
    start = site.start_ms
    crawl._revisit(HOME, start, exploring=True)
    crawl.known.add(section_url("Europe"))  # as a queued link is
    crawl._fetch(section_url("Europe"), HOME, start + 60_000, exploring=False)
    crawl._revisit(HOME, start + 2 * HOUR_MS, exploring=False)
    old = {link for link, (_, seen) in crawl.first_seen.items() if seen == start}
    queued = {link for link, _ in crawl.pending} | {link for link, _ in crawl.skipped}
    sections = {section_url(s) for s in site.sections} - {section_url("Europe")}
    assert old & sections and old & sections <= queued
    assert not (old - sections) & queued


def test_the_floor_revisits_the_section_page_on_the_topic(setup: ForagerSetup) -> None:
    """With `floor_ms` 1 day, the Europe section page (its stories rewarded) is revisited at
    least at its floor, max(μ, 1/day) (on the synthetic site every story is of one kind,
    news/s-, so which pages are on the topic is `test_revisit_listings`'s)."""
    site = build_site(setup)
    settings = RevisitPolicySettings(worth_ms=4 * HOUR_MS, floor_ms=24 * HOUR_MS)
    crawl = RevisitCrawl(site, setup.topic, Policy.DISCOVERY, settings, 60_000)
    t = site.start_ms
    while t < site.end_ms:
        t = crawl.step(t)
    europe = section_url("Europe")
    assert europe in crawl.listings.hubs and HOME in crawl.listings.hubs
    assert not {url for url in crawl.listings.hubs if url.startswith(f"{HOME}news/")}
    mu = crawl.listings.departure_rates([europe])[europe]
    assert crawl.frequency[europe] >= max(mu, 1 / (24 * HOUR_MS)) * (1 - 1e-9)


@pytest.mark.parametrize("policy", LEARNED)
def test_the_learned_rules_find_the_home_page_from_another_section(
    setup: ForagerSetup, policy: Policy
) -> None:
    """Started from the Football section page (no story of the topic), the crawl fetches
    the home page it links to; that download shows every section and story, more links
    new to the crawl than any other page, so its probe goes first and the home page ends
    with the highest frequency (with most of the budget under the discovery rule; the two
    freshness rules also revisit the section pages, which change too)."""
    site = build_site(setup)
    settings = RevisitPolicySettings(exploration=0.05)
    crawl = RevisitCrawl(site, setup.topic, policy, settings, 60_000, seed=section_url("Football"))
    t = site.start_ms
    while t < site.end_ms:
        t = crawl.step(t)
    assert max(crawl.frequency, key=crawl.frequency.__getitem__) == HOME
    if policy is Policy.DISCOVERY:
        assert crawl.pages[HOME].revisits > 0.5 * crawl.m.revisits
    assert crawl.m.fleet.relevant > 0


def test_found_counts_the_topic_stories_published_in_the_window(
    setup: ForagerSetup, tmp_path: Path
) -> None:
    """A story every 30 minutes, every third in Europe: from 12:00 to 18:00 stories 24 to 35
    appear, of which 24, 27, 30 and 33 are Europe's. At one page a minute every policy
    finds all four (the seed-only one too: the seed is the home page)."""
    out = tmp_path / "found"
    args = ["simulate", "revisits", "--news", str(setup.news), "--topic", "Europe"]
    args += ["--starts", "2022-03-01T12:00:00Z", "--days", "0.25", "--warmup-days", "0.25"]
    args += ["--download-ms", "60000", "--workers", "1", "--out", str(out)]
    assert main(args) == 0
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert {(r["published"], r["found"]) for r in rows} == {("4", "4")}
    assert "| fixed | 4.0 | 100.0% |" in (out / "summary.md").read_text()


def test_the_warm_up_is_not_counted(setup: ForagerSetup) -> None:
    """Counting from 6 h in: 18 h at one page a minute."""
    site = build_site(setup)
    m = run_revisits(
        site, setup.topic, Policy.DISCOVERY, 60_000, measure_from_ms=site.start_ms + 6 * HOUR_MS
    )
    assert m.fleet.downloaded == 1_080 and len(m.copy_fresh) == 72


def test_command_writes_summary_and_runs(setup: ForagerSetup, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = ["simulate", "revisits", "--news", str(setup.news), "--topic", "Europe"]
    args += ["--starts", "2022-03-01T12:00:00Z,2022-03-01T18:00:00Z", "--days", "0.25"]
    args += ["--warmup-days", "0.25", "--download-ms", "60000,120000", "--workers", "1"]
    args += ["--constants", "discovery:exploration=0.1", "--out", str(out)]
    assert main(args) == 0
    summary = (out / "summary.md").read_text()
    assert "## one download every 60 s" in summary and "## one download every 120 s" in summary
    assert "| 60 s | discovery | `exploration=0.1," in summary
    assert "| 120 s | discovery | `exploration=0.1," in summary
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert len(rows) == 2 * 2 * 6  # windows × rates × policies
    assert {int(r["downloads"]) for r in rows if r["download_ms"] == "60000"} == {360}


def test_several_seeds_run_every_policy_but_the_fixed_schedule_from_each(
    setup: ForagerSetup, tmp_path: Path
) -> None:
    out = tmp_path / "seeds"
    args = ["simulate", "revisits", "--news", str(setup.news), "--topic", "Europe"]
    args += ["--starts", "2022-03-01T12:00:00Z", "--days", "0.25", "--warmup-days", "0.25"]
    args += ["--download-ms", "60000", "--workers", "1", "--out", str(out)]
    args += ["--seeds", f"{HOME},{section_url('Europe')}"]
    assert main(args) == 0
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert len(rows) == 2 + 4 * 2  # the two lists once, the others from each seed
    assert {r["seed"] for r in rows if r["policy"] in ("fixed", "topic-sections")} == {""}
    assert f"| discovery from {section_url('Europe')} |" in (out / "summary.md").read_text()


def test_tuning_runs_the_grid_on_early_windows_only(setup: ForagerSetup, tmp_path: Path) -> None:
    out = tmp_path / "tune"
    args = ["simulate", "revisits", "--news", str(setup.news), "--topic", "Europe"]
    args += ["--starts", "2022-03-01T12:00:00Z", "--days", "0.25", "--warmup-days", "0.25"]
    args += ["--download-ms", "120000", "--workers", "1", "--policies", "fixed,discovery"]
    args += ["--tune", "exploration=0.02:0.2,min_revisits=1:2", "--out", str(out)]
    assert main(args) == 0
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert len(rows) == 1 + 4  # the fixed schedule once, the discovery rule at every point
    assert "| 120 s | discovery | `exploration=" in (out / "tuning.md").read_text()
    with pytest.raises(ValueError, match=f"tuning windows must end before {TUNING_END}"):
        RevisitEvaluation(
            news=setup.news, out=out, starts=REPORT_STARTS, grid=(("exploration", ("0.1",)),)
        )


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ({"nope": "1"}, "unknown constant"),
        ({"min_revisits": "none"}, "cannot be none"),
        ({"skip_below": "1"}, "skip_below must be in"),
        ({"worth_ms": "-1"}, "stale_ms, worth_ms and floor_ms must be >= 0"),
        ({"floor_ms": "-1"}, "stale_ms, worth_ms and floor_ms must be >= 0"),
    ],
)
def test_bad_constants_are_refused(items: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        with_constants(RevisitPolicySettings(), items)


def test_the_constants_tuned_at_the_nearest_rate_apply() -> None:
    """Rates tuned: 10 s, 300 s, 900 s, 1800 s. 600 s is 2× from 300 s and 1.5× from 900 s:
    900 s's apply; 60 s is 6× from 10 s and 5× from 300 s: 300 s's. The fleet on the learned
    schedule takes the discovery rule's."""
    assert set(TUNED) == {10_000, 300_000, 900_000, 1_800_000}
    assert tuned_constants(600_000) == tuned_constants(900_000)
    assert tuned_constants(600_000)[Policy.PROPORTIONAL] == TUNED[900_000][Policy.PROPORTIONAL]
    assert tuned_constants(60_000)[Policy.DISCOVERY] == TUNED[300_000][Policy.DISCOVERY]
    assert tuned_constants(10_000)[Policy.FLEET_LEARNED] == TUNED[10_000][Policy.DISCOVERY]
    assert describe(tuned_constants(1_800_000)[Policy.DISCOVERY]) == (
        "exploration=0.02,plan_ms=3600000,half_life_ms=86400000,min_revisits=1,"
        "probe_ms=900000,probe_max_ms=604800000,skip_below=0.2,stale_ms=86400000,"
        "worth_ms=14400000"
    )


def test_constants_are_read_back() -> None:
    s = with_constants(RevisitPolicySettings(), {"half_life_ms": "none", "probe_ms": "60000"})
    assert s.revisit.half_life_ms is None and s.revisit.probe_ms == 60_000
    assert with_constants(s, {"exploration": "0.2"}).exploration == 0.2
    skipping = with_constants(s, {"skip_below": "0.1"})
    assert skipping.skip_below == 0.1 and describe(skipping).endswith(",skip_below=0.1")
    assert with_constants(RevisitPolicySettings(), {}).skip_below == 0.0
    assert "skip_below" not in describe(RevisitPolicySettings())
    both = with_constants(s, {"stale_ms": "86400000", "worth_ms": "3600000"})
    assert describe(both).endswith(",stale_ms=86400000,worth_ms=3600000")
    floored = with_constants(both, {"floor_ms": "86400000"})
    assert floored.floor_ms == 86_400_000 and describe(floored).endswith(",floor_ms=86400000")
    read = dict(item.split("=") for item in describe(floored).split(","))
    assert with_constants(RevisitPolicySettings(), read) == floored
    assert with_constants(RevisitPolicySettings(), dict(_pairs(describe(both)))) == both


def _pairs(text: str) -> list[tuple[str, str]]:
    return [(k, v) for k, _, v in (item.partition("=") for item in text.split(","))]


NEWS = Path(__file__).resolve().parents[4] / "shared" / "data" / "news"


@pytest.mark.skipif(not NEWS.is_dir(), reason="the shared news recording is absent")
def test_a_day_of_the_real_news_site() -> None:
    """A day after the tuning windows, one page a minute after half a day's warm-up: every
    policy makes 1,440 downloads; the learned rules revisit the home page most and find the
    stories sooner than the round robin (the result docs/results/revisits.md reports at
    length)."""
    start = "2023-06-03T00:00:00Z"
    setup = ForagerSetup(news=NEWS, start="2023-06-02T12:00:00Z", days=1.5)
    site = build_site(setup)
    tuned = tuned_constants(60_000)
    got = {
        p: run_revisits(site, setup.topic, p, 60_000, tuned.get(p), iso_ms(start))
        for p in REVISIT_POLICIES
    }
    for m in got.values():
        assert m.fleet.downloaded == 1_440

    def mean_delay(m: RevisitMetrics) -> float:
        waits = [
            t - site.stories[u].published_ms
            for u, t in m.fleet.rewarded_at.items()
            if site.stories[u].published_ms >= iso_ms(start)
        ]
        return sum(waits) / len(waits)

    delay = {p: mean_delay(m) for p, m in got.items()}
    assert delay[Policy.DISCOVERY] < delay[Policy.FIXED]
    assert got[Policy.DISCOVERY].fleet.relevant >= got[Policy.FIXED].fleet.relevant - 2


@pytest.mark.slow
@pytest.mark.skipif(not NEWS.is_dir(), reason="the shared news recording is absent")
def test_the_report_windows_at_five_minutes_a_page(tmp_path: Path) -> None:
    """The command of docs/results/revisits.md at one rate: four 8-day windows after
    2023-06-01, every policy at equal downloads (2,304 a window)."""
    out = tmp_path / "report"
    assert (
        main(
            [
                "simulate",
                "revisits",
                "--news",
                str(NEWS),
                "--download-ms",
                "300000",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    rows = list(csv.DictReader((out / "runs.csv").open()))
    assert len(rows) == 4 * 6
    assert {int(r["downloads"]) for r in rows} == {2_304}
    assert all(r["start"] >= TUNING_END for r in rows)
