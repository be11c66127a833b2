"""The forager fleet as a strategy: routing, its entries, and the closed loop through the
embedded engine equal to the direct simulation of Palotai, Farkas & Lőrincz 2005 (`run_fleet`)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from news_recording import write_recording

from frontierflow.pipelines.core.strategy import CrawlClock, PageSeen, change_key
from frontierflow.pipelines.evaluation import forager_fleet
from frontierflow.pipelines.evaluation.forager_engine import run_fleet_on_engine
from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup, build_site, run_fleet
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.strategies.foragers import (
    ECHO_FORAGER,
    ECHO_ROLE,
    ECHO_STEP,
    SECTION_TERM,
    ForagerFleet,
    ForagerTopic,
)
from frontierflow.schemas.records import REPLY_ECHO, FetchEvent, FrontierEntry, Removal
from frontierflow.state.docvector import DocumentVectors
from frontierflow.state.fleet import FleetParams, fleet_key
from frontierflow.state.forager import Variant


def _event(url: str, echo: dict[str, str], **fields: object) -> FetchEvent:
    base: dict[str, object] = {
        "fetched_at": 1_000,
        "status": 200,
        "fetcher_id": "f",
        "host": "news.example",
        "via": None,
        "crawl_id": "c",
        "cycle": 3,
        "outlinks": ("https://news.example/a", "https://news.example/a"),
        "terms": {"storm": 2, "vote": 1, SECTION_TERM + "Europe": 1},
        "published_at": 500,
        "echo": echo,
    }
    base.update(fields)
    return FetchEvent(url=url, **base)  # type: ignore[arg-type]


def _strategy() -> ForagerFleet:
    return ForagerFleet(FleetParams(Variant.WL), ForagerTopic(frozenset({"Europe"})))


def test_a_page_goes_to_its_crawls_fleet_with_what_the_fleet_needs() -> None:
    strategy = _strategy()
    event = _event("https://news.example/", {ECHO_FORAGER: "1", ECHO_STEP: "3"})
    [(key, seen)] = strategy.route(event).messages()
    assert key == fleet_key("c") == "fleet:c"
    assert isinstance(seen, PageSeen)
    assert (seen.owner, seen.request, seen.published_ms, seen.on_topic) == (1, 3, 500, True)
    assert seen.outlinks == ("https://news.example/a",)
    # metadata terms are not words: x is the projection of storm and vote alone
    words = DocumentVectors([], 50).vector_of_counts({"storm": 2, "vote": 1})
    assert np.array_equal(np.asarray(seen.vector), words)
    # another section, a failed fetch, a page no forager asked for
    other = strategy.route(_event("u", {}, terms={SECTION_TERM + "Sport": 1})).fetched
    assert isinstance(other, PageSeen) and not other.on_topic and other.owner == -1
    failed = strategy.route(_event("u", {ECHO_FORAGER: "0", ECHO_STEP: "1"}, status=-2)).fetched
    assert isinstance(failed, PageSeen) and failed.outlinks == () and not failed.on_topic


def test_requests_are_reply_entries_of_the_steps_cycle_kept_per_url_and_via() -> None:
    strategy = _strategy()
    clock = CrawlClock(0, 0)
    key = fleet_key("c")
    state, first = strategy.apply(key, None, strategy.seed("https://news.example/", "c", 0), clock)
    assert isinstance(first, tuple) and len(first) == 1
    visit = first[0]
    assert isinstance(visit, FrontierEntry)
    assert (visit.url, visit.cycle, visit.via, visit.strategy) == (
        "https://news.example/",
        1,
        None,
        "forager-wl",
    )
    assert visit.echo == {ECHO_FORAGER: "0", ECHO_STEP: "1", ECHO_ROLE: "visit"}
    page = _event(
        "https://news.example/",
        visit.echo,
        cycle=1,
        outlinks=("https://news.example/a", "https://news.example/b"),
    )
    [(k, seen)] = strategy.route(page).messages()
    state, changes = strategy.apply(k, state, seen, CrawlClock(1, 10))
    assert isinstance(changes, tuple)
    # a path's first page was a plain entry (no via): the fleet removes it once answered
    assert changes[0] == Removal("https://news.example/")
    probes = [c for c in changes[1:] if isinstance(c, FrontierEntry)]
    assert [(p.url, p.priority, p.cycle, p.via) for p in probes] == [
        ("https://news.example/a", -0.0, 1, "https://news.example/"),
        ("https://news.example/b", -1.0, 1, "https://news.example/"),
    ]
    assert len(probes) == len(changes) - 1
    assert all(p.echo[REPLY_ECHO] == "1" and p.echo[ECHO_ROLE] == "probe" for p in probes)
    # the same URL asked for from two pages is two change keys
    a = probes[0]
    assert change_key(a) == ("https://news.example/a", "https://news.example/")
    assert change_key(replace(a, via="https://news.example/b")) != change_key(a)


def test_a_second_seed_before_any_answer_may_withdraw_the_first_request() -> None:
    strategy = _strategy()
    clock = CrawlClock(0, 0)
    key = fleet_key("c")
    state, _ = strategy.apply(key, None, strategy.seed("https://news.example/", "c", 0), clock)
    for n in range(2, 12):
        state, changes = strategy.apply(
            key, state, strategy.seed(f"https://n.example/{n}", "c", 0), clock
        )
        assert isinstance(changes, tuple)
        removals = [c for c in changes if isinstance(c, Removal)]
        entries = [c for c in changes if isinstance(c, FrontierEntry)]
        assert len(entries) == 1 and len(removals) <= 1
    assert state is not None and len(state.foragers[0].weblog) == 11


def test_fleet_constants_from_the_command_line() -> None:
    from frontierflow.pipelines.cli.common import fleet_constants

    forager, agent = fleet_constants(
        argparse.Namespace(forager="path_length=5,time_slice_ms=60000,max_age_ms=1000")
    )
    assert (forager.path_length, forager.max_age_ms) == (5, 1000)
    assert (agent.time_slice_ms, agent.max_age_ms) == (60_000, 1000)
    with pytest.raises(ValueError, match="--forager: expected NAME=VALUE"):
        fleet_constants(argparse.Namespace(forager="bogus=1"))
    fleet = build_strategy("forager-rl", budget=1, sections=("UK",), fleet=(forager, agent))
    assert isinstance(fleet, ForagerFleet) and fleet.params.forager.path_length == 5


def test_forager_strategies_need_sections_or_a_topic() -> None:
    with pytest.raises(ValueError, match="needs a topic"):
        build_strategy("forager-rl", budget=10)
    assert build_strategy("forager-wlrl", budget=10, sections=("UK",)).name == "forager-wlrl"


@pytest.mark.parametrize("variant", list(Variant))
def test_the_engine_walks_the_news_site_as_the_direct_simulation(
    tmp_path: Path, variant: Variant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator in the engine, fed by a simulated fetcher, downloads the same pages at
    the same times and counts the same sends and relevant documents as `run_fleet`."""
    write_recording(tmp_path)
    setup = ForagerSetup(news=tmp_path, start="2022-03-01T06:00:00Z", days=0.4, topic=("Europe",))
    site = build_site(setup)
    direct: list[tuple[str, int]] = []
    count = forager_fleet.FleetMetrics.count_download

    def record(self: forager_fleet.FleetMetrics, url: str, t: int, start: int) -> None:
        direct.append((url, t))
        count(self, url, t, start)

    monkeypatch.setattr(forager_fleet.FleetMetrics, "count_download", record)
    metrics = run_fleet(site, setup, variant, seed=3)
    engine: list[tuple[str, int]] = []
    run = run_fleet_on_engine(
        site,
        setup,
        variant,
        3,
        on_event=lambda e: engine.append((e.url, e.fetched_at - setup.download_ms)),
    )
    assert len(direct) > 1000
    assert engine == direct
    c = run.counters
    assert (c.downloads, c.sent, c.relevant, c.stale) == (
        metrics.downloaded,
        metrics.sent,
        metrics.relevant,
        0,
    )
    assert metrics.relevant > 0
    # run_fleet cuts its last time slice at the end of the run and manages the forager
    # there; the operator manages at a slice's full length, so the last decision may differ
    assert run.population in metrics.population[-2:]
