"""The embedded engine applies the frontier's host rule: a deferred answer (`will_retry`)
changes its host's state only, entries of a paused host go out held until the pause ends
(`not_before`, at event time: a replay holds the same entries), and the host states are
committed with the step and read back by a new engine on the same store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from list_sink import ListSink

from frontierflow.connectors.base import Position
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.embedded.hosts import HOST_PREFIX
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.container import write_container
from frontierflow.schemas.records import FetchEvent, FrontierEntry
from frontierflow.state.hosts import decode_host_state, group_key
from frontierflow.state.storage.memory import InMemoryStore
from frontierflow.state.storage.store import META_FAMILY


def _event(url: str, at: int, status: int = 200, **fields: Any) -> FetchEvent:
    host = url.split("/")[2]
    return FetchEvent(url=url, fetched_at=at, status=status, fetcher_id="f", host=host, **fields)


def _engine(store: InMemoryStore, sink: ListSink) -> Engine[Any]:
    return Engine(build_strategy("bfs", budget=100), store, sink)


def test_deferred_answer_and_held_entries() -> None:
    strategy = build_strategy("bfs", budget=100)
    store = InMemoryStore(Engine.families_for(strategy))
    sink = ListSink()
    engine = _engine(store, sink)
    busy = "http://busy.test/"
    items = [
        # the busy host answers 429 for 15 s: deferred, its page not counted
        (Position(None, 0), _event(busy, 1_000, 429, retry_after_ms=15_000, will_retry=True), b""),
        # a page of another host links to two busy pages and one of its own
        (
            Position(None, 1),
            _event(
                "http://good.test/",
                2_000,
                outlinks=("http://busy.test/a", "http://busy.test/b", "http://good.test/x"),
            ),
            b"",
        ),
    ]
    engine.run_step(items)
    assert engine.stats.deferred == 1 and engine.stats.events == 1
    assert engine.crawled() == 1  # the 429 is not a page of the crawl
    entries = {c.url: c for c in sink.changes if isinstance(c, FrontierEntry)}
    assert entries["http://busy.test/a"].not_before == 16_000
    assert entries["http://busy.test/b"].not_before == 16_000
    assert entries["http://good.test/x"].not_before is None
    assert engine.stats.held == 2

    raw = store.get(META_FAMILY, HOST_PREFIX + group_key("default", "busy.test").encode())
    assert raw is not None
    state = decode_host_state(raw)
    assert (state.paused_until, state.reason, state.pages) == (16_000, "429", 0)

    # a new engine on the store knows the pause; after it, entries go out unheld
    sink2 = ListSink()
    engine2 = _engine(store, sink2)
    assert engine2.paused == {group_key("default", "busy.test"): 16_000}
    engine2.run_step(
        [
            (
                Position(None, 2),
                _event("http://good.test/x", 3_000, outlinks=("http://busy.test/c",)),
                b"",
            )
        ]
    )
    held = {c.url: c.not_before for c in sink2.changes if isinstance(c, FrontierEntry)}
    assert held == {"http://busy.test/c": 16_000}
    engine2.run_step(
        [
            (
                Position(None, 3),
                _event("http://busy.test/", 16_500, outlinks=("http://busy.test/d",)),
                b"",
            )
        ]
    )
    later = {
        c.url: c.not_before for c in sink2.changes[len(held) :] if isinstance(c, FrontierEntry)
    }
    assert later.get("http://busy.test/d", "absent") is None
    assert engine2.crawled() == 3  # the busy page's own fetch now counts


def test_hosts_not_tracked_when_the_rule_is_off() -> None:
    strategy = build_strategy("bfs", budget=100)
    store = InMemoryStore(Engine.families_for(strategy))
    sink = ListSink()
    engine = Engine(strategy, store, sink, hosts=None)
    engine.run_step(
        [(Position(None, 0), _event("http://a.test/", 1, 429, retry_after_ms=9_000), b"")]
    )
    assert not any(k.startswith(HOST_PREFIX) for k, _ in store.items(META_FAMILY))
    assert engine.crawled() == 1  # without will_retry a 429 is the page's answer


def _pause_log() -> list[tuple[Position, FetchEvent, bytes]]:
    """good.test links to busy.test/a at 1 s; busy.test answers 429 (Retry-After 15 s) at
    2 s; good.test/x links to busy.test/b at 3 s."""
    events = [
        _event("http://good.test/", 1_000, outlinks=("http://busy.test/a", "http://good.test/x")),
        _event("http://busy.test/", 2_000, 429, retry_after_ms=15_000, will_retry=True),
        _event("http://good.test/x", 3_000, outlinks=("http://busy.test/b",)),
    ]
    return [(Position(None, i), e, b"") for i, e in enumerate(events)]


@pytest.mark.parametrize("step_size", [1, 2, 3])
def test_an_entry_is_held_by_the_pause_under_way_when_it_was_emitted(step_size: int) -> None:
    """Held by event time, whatever the step: busy.test/a was emitted at 1 s, before the
    pause began (not held); busy.test/b at 3 s, inside the pause 2 s + 15 s (held until
    17 s)."""
    strategy = build_strategy("bfs", budget=100)
    store = InMemoryStore(Engine.families_for(strategy))
    sink = ListSink()
    engine = _engine(store, sink)
    log = _pause_log()
    for at in range(0, len(log), step_size):
        engine.run_step(log[at : at + step_size])
    held = {
        c.url: c.not_before
        for c in sink.changes
        if isinstance(c, FrontierEntry) and c.host == "busy.test"
    }
    assert held == {"http://busy.test/a": None, "http://busy.test/b": 17_000}
    assert engine.stats.held == 1
    assert engine.paused == {group_key("default", "busy.test"): 17_000}


@pytest.mark.parametrize(("options", "until"), [([], 62_000), (["--backoff-base", "5"], 7_000)])
def test_replay_takes_the_host_rules_options(
    tmp_path: Path, options: list[str], until: int
) -> None:
    """`frontierflow replay` with the fetchers' host options: busy.test answers 503 without
    Retry-After at 2 s; good.test links to busy.test/b at 3 s. A back-off of 5 s with no
    jitter holds the entry until 2 s + 5 s; the default 60 s until 62 s."""
    events = [
        _event("http://busy.test/", 2_000, 503, will_retry=True),
        _event("http://good.test/", 3_000, outlinks=("http://busy.test/b",)),
    ]
    log = tmp_path / "events.avro"
    write_container(log, "FetchEvent", [e.to_avro() for e in events])
    out = tmp_path / "out.jsonl"
    argv = ["replay", str(log), "--strategy", "bfs", "--state-dir", str(tmp_path / "state"),
            "--out", str(out), "--backoff-jitter", "0", *options]  # fmt: skip
    assert main(argv) == 0
    entries = {e["url"]: e for e in map(json.loads, out.read_text().splitlines())}
    held = entries["http://busy.test/b"]["not_before"]
    assert held == until
