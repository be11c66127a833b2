"""The bounded replay's blocks (`beam.shard_blocks`): routed per bucket, folded per shard,
they give every key the updates the step core gives it from its messages in input order,
whichever way the buckets interleave and whichever fold a strategy takes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from frontierflow.connectors.logs import record_from_dict
from frontierflow.pipelines.beam.coders import UrlUpdate
from frontierflow.pipelines.beam.exact_clock import encode_fetch
from frontierflow.pipelines.beam.shard_blocks import (
    FOLD_SHARD_BYTES,
    MIN_FOLD_SHARDS,
    fold_blocks,
    fold_shards,
    route_blocks,
)
from frontierflow.pipelines.core.step import (
    FetchKind,
    LatestChanges,
    apply_messages,
    crawl_clock,
    is_repeat_fetch,
    keyed_messages,
)
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.records import FetchEvent

BUCKET = 16  # small buckets, so a shard gets blocks from many of them
OWN_KEY_STRATEGIES = ("ieca", "ieca-plus", "bfs", "backlink", "opic", "random")


@pytest.fixture
def two_crawls(fetch_events: Callable[..., list[dict[str, Any]]]) -> list[FetchEvent]:
    """Two crawls of one URL space, their events interleaved: a key gets messages from
    both, and the two crawls' buckets cover overlapping positions."""
    common = {"pages": 120, "url": "https://h{host}.example.com/p/{page}", "hosts": 7}
    a = fetch_events(90, seed=3, max_outlinks=12, crawl_id="a", **common)
    b = fetch_events(90, seed=4, max_outlinks=12, crawl_id="b", **common)
    records = [r for pair in zip(a, b, strict=True) for r in pair]
    return [record_from_dict(FetchEvent, r) for r in records]


def fetches_by_bucket(
    events: list[FetchEvent], keep_repeats: bool
) -> tuple[dict[tuple[str, int], list[tuple[int, int, bytes]]], dict[tuple[str, int], int]]:
    """What `beam.exact_clock` hands the routing: each (crawl, bucket)'s fetches with the
    repeat rule's verdicts, and the pages of its crawl first fetched before each bucket."""
    last: dict[str, int] = {}
    buckets: dict[tuple[str, int], list[tuple[int, int, bytes]]] = defaultdict(list)
    firsts: dict[tuple[str, int], int] = defaultdict(int)
    for position, event in enumerate(events):
        repeat = is_repeat_fetch(last.get(event.url), event.cycle)
        if not repeat:
            last[event.url] = event.cycle
        elif not keep_repeats:
            continue
        kind = FetchKind.REPEAT if repeat else FetchKind.FIRST
        bucket = (event.crawl_id, position // BUCKET)
        buckets[bucket].append((position, int(kind), encode_fetch(event)))
        firsts[bucket] += not repeat
    before: dict[tuple[str, int], int] = {}
    totals: dict[str, int] = defaultdict(int)
    for crawl, bucket in sorted(firsts):
        before[(crawl, bucket)] = totals[crawl]
        totals[crawl] += firsts[(crawl, bucket)]
    return buckets, before


def expected_updates(strategy: Any, events: list[FetchEvent]) -> dict[str, UrlUpdate]:
    """The step core key by key: every key's messages in input order, folded from no
    state with `apply_messages`."""
    last: dict[str, int] = {}
    pages: dict[str, int] = defaultdict(int)
    queues: dict[str, list[Any]] = defaultdict(list)
    for event in events:
        repeat = is_repeat_fetch(last.get(event.url), event.cycle)
        if not repeat:
            last[event.url] = event.cycle
        clock = crawl_clock(pages[event.crawl_id], repeat, event.fetched_at)
        pages[event.crawl_id] = clock.crawled
        for key, message in keyed_messages(strategy, event, repeat):
            queues[key].append((clock, message))
    out = {}
    for key, queue in queues.items():
        latest: LatestChanges = {}
        state = apply_messages(strategy, key, None, queue, latest)
        encoded = None if state is None else strategy.encode_state(state)
        out[key] = UrlUpdate(key, encoded, tuple(latest.values()))
    return out


def folded(strategy: Any, events: list[FetchEvent], shards: int) -> dict[str, UrlUpdate]:
    buckets, before = fetches_by_bucket(events, strategy.learns_from_repeats)
    blocks: dict[int, list[bytes]] = defaultdict(list)
    for bucket in sorted(buckets, reverse=True):  # the fold must not rely on block order
        for shard, block in route_blocks(bucket, buckets[bucket], strategy, before, shards):
            blocks[shard].append(block)
    out: dict[str, UrlUpdate] = {}
    for shard_blocks in blocks.values():
        for update in fold_blocks(strategy, shard_blocks):
            assert update.url not in out  # a key lives in one shard
            out[update.url] = update
    return out


def comparable(updates: dict[str, UrlUpdate]) -> dict[str, tuple[Any, ...]]:
    return {url: (u.state, sorted(map(repr, u.changes))) for url, u in updates.items()}


@pytest.mark.parametrize("name", OWN_KEY_STRATEGIES)
@pytest.mark.parametrize("shards", [1, 5])
def test_blocks_fold_every_key_as_the_step_core_does(
    name: str, shards: int, two_crawls: list[FetchEvent]
) -> None:
    strategy = build_strategy(name, budget=60, seed=0)
    events = two_crawls
    expected = expected_updates(strategy, events)
    got = folded(strategy, events, shards)
    assert comparable(got) == comparable(expected)
    assert len(got) > 100
    assert sum(bool(u.changes) for u in got.values()) > 50


@pytest.mark.parametrize("name", OWN_KEY_STRATEGIES)
def test_changes_own_key_holds_for_the_strategies_that_claim_it(
    name: str, two_crawls: list[FetchEvent], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The one-pass fold tells keys' changes apart by URL: every change a key's messages
    emit is for that key, and key by key the fold gives the same updates."""
    strategy = build_strategy(name, budget=60, seed=0)
    assert strategy.changes_own_key
    events = two_crawls
    for key, update in expected_updates(strategy, events).items():
        assert all(change.url == key for change in update.changes)
    one_pass = folded(strategy, events, 3)
    monkeypatch.setattr(type(strategy), "changes_own_key", False)  # the key-by-key fold
    key_by_key = folded(strategy, events, 3)
    assert comparable(one_pass) == comparable(key_by_key)


def test_fold_shards_follow_the_log_size() -> None:
    assert fold_shards(None) == MIN_FOLD_SHARDS
    assert fold_shards(1) == MIN_FOLD_SHARDS
    assert fold_shards(MIN_FOLD_SHARDS * FOLD_SHARD_BYTES) == MIN_FOLD_SHARDS
    assert fold_shards(40 * FOLD_SHARD_BYTES + 1) == 41
