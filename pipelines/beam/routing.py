"""Step 3 of the unbounded form (`beam.stream`): the crawl clock meets a window's first
fetches as a side input, and they are routed into keyed messages by the step core.

Joining them by grouping instead (the clock value of each window fanned out to the crawl's
shards and grouped with the fetches in one `CoGroupByKey`, no side input) was tried for
Flink, whose streaming operator for a step with side inputs fails each checkpoint taken
while main input waits for the side input (a `ClassCastException` in the snapshot of the
pushed-back elements, Beam's Flink runner 2.62). It was dropped: now and then a window's
fetches were grouped before its clock value arrived, and a run with checkpoints and a
killed TaskManager did not end equal to the embedded engine (`docs/RESULTS.md`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
from apache_beam import typehints

from frontierflow.pipelines.beam.event_time import due_of
from frontierflow.pipelines.beam.replay import message_tuple
from frontierflow.pipelines.beam.shard_state import STATE_SHARDS, state_shard
from frontierflow.pipelines.core.step import crawl_clock, keyed_messages
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.schemas.records import FetchEvent

ROUTE_SHARDS = 8
"""Keys per crawl over which a window's fetches are grouped before routing (by a hash of
the URL): the routing of one window runs on this many workers at most."""

Fetch = tuple[int, bool, FetchEvent]
"""(position, repeat, event) of a first fetch (or a repeat a strategy learns from)."""
ShardKey = typehints.Tuple[str, int]


class AttachClock(beam.PTransform):
    """Windowed first fetches + the clock side input → (state shard, [(key, ordered keyed
    message), …]): a window's messages of one routing group, gathered per shard of their
    key (`beam.shard_state.state_shard`), so the next grouping moves a few lists per
    window instead of one element per message.

    A window's fetches are grouped (per crawl and shard of the URL) before they meet the
    side input, so the routing step sees a window only once its upstream watermark passed
    it. Fed straight from the repeat step, Prism ran fetches of windows ahead of that
    watermark (emitted by other keys' timers) with the clock side input as it was at that
    moment: under load whole windows read an empty clock (crawled = 1) and IECA's δ_t and α
    went wrong (`docs/RESULTS.md`). A fetch that still finds no clock value for its crawl
    (every window holding a fetch has one: `WindowedCrawlClock`) stops the job with
    `ClockMissing` rather than routing with a wrong clock."""

    def __init__(self, strategy: Strategy[Any], shards: int = STATE_SHARDS) -> None:
        super().__init__()
        self.strategy = strategy
        self.shards = shards

    def expand(self, pcolls: Any) -> Any:
        firsts, clock = pcolls
        return (
            firsts
            | "ByShard"
            >> beam.Map(_by_shard).with_output_types(
                typehints.KV[ShardKey, typehints.Tuple[int, bool, FetchEvent]]
            )
            | "WindowByShard" >> beam.GroupByKey()
            | "Route"
            >> beam.ParDo(
                _RouteWithClock(self.strategy, self.shards), beam.pvalue.AsDict(clock)
            ).with_output_types(typehints.KV[int, typehints.List[typehints.Any]])
        )


def route_shard(url: str) -> int:
    """The routing shard of a page: CRC-32 of its URL, stable across processes."""
    return state_shard(url, ROUTE_SHARDS)


def _by_shard(first: tuple[str, Fetch]) -> tuple[tuple[str, int], Fetch]:
    return (first[0], route_shard(first[1][2].url)), first[1]


class ClockMissing(RuntimeError):
    """Fetches of a window met no clock value in the side input: the runner ran them before
    the side input was ready for their window. Raised rather than routing with a wrong
    clock."""


class _RouteWithClock(beam.DoFn):
    def __init__(self, strategy: Strategy[Any], shards: int) -> None:
        self.strategy = strategy
        self.shards = shards

    def process(
        self,
        element: tuple[tuple[str, int], Iterable[Fetch]],
        before: dict[str, int],
        window: Any = beam.DoFn.WindowParam,
    ) -> Iterator[Any]:
        (crawl_id, _), fetches = element
        routed = route_window(
            self.strategy, crawl_id, due_of(window), before.get(crawl_id), fetches
        )
        return iter(by_state_shard(routed, self.shards).items())


def by_state_shard(
    routed: Iterable[tuple[str, Any]], shards: int
) -> dict[int, list[tuple[str, Any]]]:
    """(key, message)s gathered per state shard of their key, in their order."""
    out: dict[int, list[tuple[str, Any]]] = {}
    for key, message in routed:
        out.setdefault(state_shard(key, shards), []).append((key, message))
    return out


def route_window(
    strategy: Strategy[Any],
    crawl_id: str,
    due: int,
    pages_before: int | None,
    fetches: Iterable[Fetch],
) -> Iterator[Any]:
    """A window's fetches of one crawl (and shard) as (key, (due, position, index, crawled,
    now, message)): the step core's clock and routing, the order the per-URL step keeps."""
    if pages_before is None:
        raise ClockMissing(f"crawl {crawl_id!r}: no clock value for the window due {due} µs")
    for position, repeat, event in fetches:
        clock = crawl_clock(pages_before, repeat, event.fetched_at)
        messages = keyed_messages(strategy, event, repeat)
        for index, (key, message) in enumerate(messages):
            yield key, (due, position, index, clock.crawled, clock.now_ms, message_tuple(message))
