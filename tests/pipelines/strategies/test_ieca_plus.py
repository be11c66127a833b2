"""The IECA+ operator on a walk through the embedded engine, values worked out by hand."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from frontierflow.connectors.base import Position, Sink
from frontierflow.pipelines.core.strategy import CrawlClock, Fetched, Link, Reinforce, Seed
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.strategies.ieca_plus import ECHO_DISTANCE, IecaPlusStrategy
from frontierflow.schemas.records import (
    DeadLetter,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    Removal,
)
from frontierflow.state.ieca import IecaParams
from frontierflow.state.ieca_plus import IecaPlusDistance, IecaPlusParams
from frontierflow.state.storage.memory import InMemoryStore

LOG2 = math.log10(2)
P = IecaPlusParams(IecaParams(budget=1000, k=25), damping_scale=1.0)  # δ = δ_t: eq. 13


def _event(url: str, outlinks: tuple[str, ...], echo: dict[str, str], at: int) -> FetchEvent:
    return FetchEvent(
        url=url,
        fetched_at=at,
        status=200,
        fetcher_id="f",
        host="h",
        crawl_id="c",
        outlinks=outlinks,
        echo=echo,
    )


class _Collect(Sink):
    def __init__(self) -> None:
        self.changes: list[FrontierChange] = []

    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None:
        self.changes.extend(changes)

    def flush(self) -> bytes:
        return b""

    def rewind(self, position: bytes | None) -> None:
        return None


def _entry(change: FrontierChange) -> FrontierEntry:
    assert isinstance(change, FrontierEntry)
    return change


def test_walk_through_the_engine() -> None:
    """Seed A; fetch A → {B, C}; fetch B → {C, D}. δ_t = 0.35 (fewer than k = 25 pages).

    B and C from A (0.3, O = 2): 0.195 + log10 2 = 0.49603 each.
    From B (0.49603, O = 2): candidate 0.65·0.49603 + log10 2 = 0.62345.
    C: −log10(10^−0.49603 + 10^−0.62345) = 0.49603 − log10(1 + 0.74571) = 0.49603 − 0.24198
    = 0.25405.
    D (new): 0.62345.
    """
    strategy = IecaPlusStrategy(P)
    sink = _Collect()
    engine = Engine(strategy, InMemoryStore(Engine.families_for(strategy)), sink)
    a, b, c, d = (f"https://{x}.example/" for x in "abcd")
    engine.seed([a], crawl_id="c")
    seed_entry = _entry(sink.changes[-1])
    assert seed_entry.priority == -0.3 and seed_entry.strategy == "ieca-plus"
    assert seed_entry.echo == {ECHO_DISTANCE: "0.3"}

    engine.run_step([(Position(None, 0), _event(a, (b, c), seed_entry.echo, 1), b"")])
    by_url = {ch.url: ch for ch in sink.changes[1:]}
    assert isinstance(by_url[a], Removal)
    d_b = 0.65 * 0.3 + LOG2
    assert _entry(by_url[b]).priority == pytest.approx(-d_b)
    assert _entry(by_url[c]).priority == pytest.approx(-d_b)
    assert _entry(by_url[b]).via == a

    engine.run_step([(Position(None, 1), _event(b, (c, d), _entry(by_url[b]).echo, 2), b"")])
    by_url = {ch.url: ch for ch in sink.changes}
    candidate = 0.65 * d_b + LOG2
    assert candidate == pytest.approx(0.62345, abs=1e-5)
    entry_c = _entry(by_url[c])
    assert entry_c.priority == pytest.approx(-0.25405, abs=2e-5)
    assert float(entry_c.echo[ECHO_DISTANCE]) == pytest.approx(0.25405, abs=2e-5)
    assert entry_c.via == b
    assert _entry(by_url[d]).priority == pytest.approx(-candidate)
    assert engine.crawled("c") == 2
    # C now comes before B's sibling D and before what it was after one parent
    assert -entry_c.priority < d_b < candidate


def test_link_to_a_crawled_page_changes_nothing() -> None:
    strategy = IecaPlusStrategy(P)
    crawled = IecaPlusDistance(0.4, 2, 0)
    link = Link("https://b/", "https://a/", "c", 0, 0.3, LOG2)
    assert strategy.apply("https://b/", crawled, link, CrawlClock(5, 0)) == (crawled, None)


def test_fetch_keeps_the_distance_and_marks_the_cycle() -> None:
    strategy = IecaPlusStrategy(P)
    fetched = Fetched("https://b/", "c", 2, ())
    waiting = IecaPlusDistance(0.7, 3)
    state, change = strategy.apply("https://b/", waiting, fetched, CrawlClock(1, 0))
    assert state == IecaPlusDistance(0.7, 3, 2) and change == Removal("https://b/")
    # a page fetched with no known distance (a fetcher found it) counts as a starting page
    state, _ = strategy.apply("https://x/", None, fetched, CrawlClock(1, 0))
    assert state == IecaPlusDistance(0.3, 0, 2)


def test_seed_and_messages_it_ignores() -> None:
    strategy = IecaPlusStrategy(P)
    state, change = strategy.apply("https://s/", None, Seed("https://s/", "c", 0), CrawlClock(0, 0))
    assert state == IecaPlusDistance(0.3, 0, -1)
    assert _entry(change).via is None
    # a page crawled in the cycle is not re-seeded; a Reinforce means nothing to IECA+
    done = IecaPlusDistance(0.3, 0, 0)
    assert strategy.apply("https://s/", done, Seed("https://s/", "c", 0), CrawlClock(1, 0)) == (
        done,
        None,
    )
    reinforce = Reinforce("https://s/", "https://t/", "c", 0)
    assert strategy.apply("https://s/", done, reinforce, CrawlClock(1, 0)) == (done, None)


def test_echo_payload_and_damping_follow_the_clock() -> None:
    strategy = IecaPlusStrategy(P)
    event = _event("https://a/", ("https://b/",) * 3 + ("https://c/",), {ECHO_DISTANCE: "0.9"}, 1)
    assert strategy.link_payload(event, 2) == (0.9, pytest.approx(LOG2))
    bad = _event("https://a/", (), {ECHO_DISTANCE: "nan"}, 1)
    assert strategy.link_payload(bad, 1) == (0.3, 0.0)  # unreadable echo: a starting page
    assert strategy.damping(0) == pytest.approx(0.35)
    assert strategy.damping(500) == pytest.approx(0.35 - 0.28 * 0.5)


def test_registry_builds_it_with_the_crawl_constants() -> None:
    strategy = build_strategy("ieca-plus", budget=100_000)
    assert isinstance(strategy, IecaPlusStrategy)
    assert strategy.params.ieca.k == 2_500 and strategy.params.ieca.budget == 100_000
