"""Scheduled revisits on the embedded engine (`--revisit fixed:INTERVAL`): every successful
download of a page sends its URL again with `not_before` = `fetched_at` + INTERVAL; the
answer to that entry is a revisit — routed as the page's first fetch was (its new links
reach the strategy), not counted as a page of the crawl — and answered once; a revisit that
downloads nothing schedules no other. Breadth-first's entries are worked out by hand:
priority = −depth, a child one deeper than its parent's echoed depth."""

from __future__ import annotations

from typing import Any

import pytest
from list_sink import ListSink

from frontierflow.connectors.base import Position
from frontierflow.pipelines.core.revisit import REVISIT_FLOOR
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.records import REVISIT_ECHO, FetchEvent, FrontierEntry, Removal
from frontierflow.state.revisit_schedule import (
    REVISITS_FAMILY,
    RevisitMode,
    RevisitPolicy,
    decode_page_schedule,
)
from frontierflow.state.storage.memory import InMemoryStore

A, B, C = "http://a.test/", "http://a.test/b", "http://a.test/c"
MINUTE = 60_000
FIXED = RevisitPolicy(RevisitMode.FIXED, interval_ms=MINUTE)


def _event(url: str, at: int, status: int = 200, **fields: Any) -> FetchEvent:
    return FetchEvent(
        url=url, fetched_at=at, status=status, fetcher_id="f", host="a.test", **fields
    )


def _engine(revisit: RevisitPolicy | None) -> tuple[Engine[Any], ListSink, InMemoryStore]:
    strategy = build_strategy("bfs", budget=100)
    store = InMemoryStore(Engine.families_for(strategy, revisit=revisit is not None))
    sink = ListSink()
    return Engine(strategy, store, sink, revisit=revisit), sink, store


def _step(engine: Engine[Any], *events: FetchEvent) -> None:
    engine.run_step([(Position(None, i), e, b"") for i, e in enumerate(events)])


def test_a_download_schedules_its_revisit_whose_answer_is_routed_once() -> None:
    engine, sink, store = _engine(FIXED)
    _step(engine, _event(A, 1_000, outlinks=(B,), echo={"bfs.depth": "0"}))
    (revisit,) = [c for c in sink.changes if isinstance(c, FrontierEntry) and c.url == A]
    assert revisit == FrontierEntry(
        A, "a.test", -(REVISIT_FLOOR + 61_000), "bfs", "default", 0, None, 1_000,
        {"bfs.depth": "0", REVISIT_ECHO: "61000"}, not_before=61_000,
    )  # fmt: skip
    assert Removal(A) not in sink.changes  # the revisit replaces the page's tombstone
    _step(engine, _event(B, 2_000, echo={"bfs.depth": "1"}))
    assert engine.crawled() == 2

    # the revisit's answer: A now also links to C, which enters the frontier at depth 1
    del sink.changes[:]
    _step(engine, _event(A, 61_500, outlinks=(B, C), echo=revisit.echo))
    entries = {c.url: c for c in sink.changes if isinstance(c, FrontierEntry)}
    assert set(entries) == {A, C} and entries[C].priority == -1.0
    assert entries[A].not_before == 121_500 and entries[A].echo[REVISIT_ECHO] == "121500"
    assert engine.crawled() == 2 and engine.stats.revisits == 1  # not one more page
    record = decode_page_schedule(store.get(REVISITS_FAMILY, A.encode()) or b"")
    assert record.answered_ms == 61_000

    # the same revisit answered again (a fetcher restarted), a plain fetch of A: repeats
    del sink.changes[:]
    _step(engine, _event(A, 62_000, echo=revisit.echo), _event(A, 63_000))
    assert sink.changes == [] and engine.stats.duplicates == 2

    # a revisit that downloads nothing schedules no other: the page's tombstone stands
    _step(engine, _event(A, 121_600, status=404, echo=entries[A].echo))
    assert sink.changes == [Removal(A)] and engine.stats.revisits == 2


def test_without_revisits_an_answer_to_a_revisit_entry_is_a_repeat() -> None:
    engine, sink, _ = _engine(None)
    _step(engine, _event(A, 1_000, outlinks=(B,)))
    assert Removal(A) in sink.changes
    _step(engine, _event(A, 61_500, outlinks=(B, C), echo={REVISIT_ECHO: "61000"}))
    assert engine.stats.duplicates == 1 and len(sink.changes) == 2


def test_a_strategy_that_asks_again_itself_takes_no_revisit_policy() -> None:
    fleet = build_strategy("forager-wl", budget=1, sections=("Europe",))
    store = InMemoryStore(Engine.families_for(fleet, revisit=True))
    with pytest.raises(ValueError, match="schedules its own revisits"):
        Engine(fleet, store, ListSink(), revisit=FIXED)
