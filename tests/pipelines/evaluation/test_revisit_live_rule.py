"""The live job's learned revisit rule in the simulated news crawl (`simulate revisits
--policies live`) is the embedded engine's: the downloads the simulation made, replayed as
FetchEvents through the engine with `--revisit learned:EVERY`, give every page the same
`not_before` and leave the same revisit records per page and per host."""

from __future__ import annotations

from pathlib import Path

import pytest
from list_sink import ListSink
from news_recording import write_recording

from frontierflow.connectors.base import Position
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup, build_site
from frontierflow.pipelines.evaluation.revisit_live_rule import LiveRevisitRule, live_policy
from frontierflow.pipelines.evaluation.revisit_policy import (
    REVISIT_POLICIES,
    Policy,
    RevisitPolicySettings,
)
from frontierflow.pipelines.evaluation.revisits import RevisitCrawl
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.records import REVISIT_ECHO, FrontierEntry, revisit_due
from frontierflow.state.hosts import group_key
from frontierflow.state.revisit_schedule import (
    REVISITS_FAMILY,
    RevisitMode,
    RevisitPolicy,
    encode_host_revisits,
    encode_page_schedule,
    host_revisits_key,
)
from frontierflow.state.storage.memory import InMemoryStore

STEP = 13
"""Events per engine step (any size gives the same schedule)."""


def _simulated(tmp_path: Path, download_ms: int) -> RevisitCrawl:
    write_recording(tmp_path)
    setup = ForagerSetup(news=tmp_path, start="2022-03-01T06:00:00Z", days=1.0, topic=("Europe",))
    site = build_site(setup)
    crawl = RevisitCrawl(site, setup.topic, Policy.LIVE, RevisitPolicySettings(), download_ms)
    t = site.start_ms
    while t < site.end_ms:
        t = crawl.step(t)
    return crawl


@pytest.mark.parametrize(("download_ms", "least"), [(60_000, 30), (900_000, 5)])
def test_the_simulated_live_rule_schedules_as_the_embedded_engine(
    tmp_path: Path, download_ms: int, least: int
) -> None:
    crawl = _simulated(tmp_path, download_ms)
    rule = crawl.live
    assert rule is not None
    events = rule.events
    revisits = [e for e in events if REVISIT_ECHO in e.echo]
    assert len(revisits) == crawl.m.revisits > least  # a day: few probes at 15 min
    # a page is downloaded again only once its revisit is due, as a fetcher honours not_before
    assert all(e.fetched_at >= (revisit_due(e.echo) or 0) for e in revisits)
    # the schedule is not only probes: pages with a change rate share the host's budget
    assert any(p.weight > 0 for p in rule.pages.values())

    strategy = build_strategy("bfs", budget=1000)
    policy = live_policy(download_ms)
    store = InMemoryStore(Engine.families_for(strategy, revisit=True))
    sink = ListSink()
    engine = Engine(strategy, store, sink, revisit=policy)
    for i in range(0, len(events), STEP):
        engine.run_step(
            [(Position(None, i + k), e, b"") for k, e in enumerate(events[i : i + STEP])]
        )
    assert engine.stats.revisits == len(revisits) and engine.stats.duplicates == 0

    latest: dict[str, FrontierEntry] = {}
    for change in sink.changes:
        if isinstance(change, FrontierEntry) and REVISIT_ECHO in change.echo:
            latest[change.url] = change
    assert {u: e.not_before for u, e in latest.items()} == rule.due
    # a story (its download says when it was published) is asked for no more
    stories = {e.url for e in events if e.published_at is not None}
    assert stories and not stories & rule.due.keys()
    expected = {u.encode(): encode_page_schedule(p) for u, p in rule.pages.items()}
    key = host_revisits_key(group_key("news", "www.bbc.com"))
    expected[key.encode()] = encode_host_revisits(rule.hosts[group_key("news", "www.bbc.com")])
    assert dict(store.items(REVISITS_FAMILY)) == expected


def test_the_live_rule_is_asked_for_by_name_only() -> None:
    """Not in the default comparison (it may make fewer downloads), tuned by nothing, and
    only the learned rule has a simulated form."""
    assert Policy.LIVE not in REVISIT_POLICIES and not Policy.LIVE.learns
    with pytest.raises(ValueError, match="learned one"):
        LiveRevisitRule(RevisitPolicy(RevisitMode.FIXED, interval_ms=60_000))
