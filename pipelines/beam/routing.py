"""The unbounded form's routing (`beam.stream`): a repeat shard's fetches of a clock window
turned into keyed messages by the step core, gathered per state shard of their key, with
the pages the shard counted in the window beside them.

The repeat step routes what it lets through as soon as it has decided it, in the same
firing: the step core's `keyed_messages` does not read the crawl clock, so no step has to
wait for the clock before routing. A message carries its clock relative to its window's
start instead, `crawl_clock(0, …)` — 1 for a first fetch (it counts itself), 0 for a
revisit or a repeat — and the per-URL update (`beam.stream_update`) adds before(w), the
pages counted in the windows before w, when it applies it. That count is kept by each
state shard of the update from the counts every repeat shard sends it beside its messages
(`RoutedWindow`): one item per repeat shard, state shard and window, so a window's fetches
cross two timer-ordered steps, not three, and their bytes one shuffle, not two.

Earlier forms counted the clock in a routing step of its own between the two, keyed by
crawl and routing shard, which held every fetch's bytes once more and decoded them there;
before that, a windowed count of its own and a side input (Flink's portable runner
cannot snapshot the main input it pushes back while it waits for the side input, a
`ClassCastException`; `docs/results/beam.md`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from apache_beam import typehints

from frontierflow.pipelines.beam.shard_blocks import message_tuple
from frontierflow.pipelines.beam.shard_state import state_shard
from frontierflow.pipelines.beam.window_batches import HeldBatch, held_batch, shard_batch
from frontierflow.pipelines.core.step import FetchKind, crawl_clock, keyed_messages
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.schemas.records import FetchEvent

RoutedWindow = typehints.KV[int, typehints.Tuple[int, int, bytes]]
"""(state shard, (due µs of a clock window, the position of the repeat shard's first fetch
in it, the encoded `window_batches.Batch`: url → its messages (due, position, index, the
clock's offset in the window, now ms, message tuple) in (position, index) order, no
pauses, the crawl id (None: the messages read no clock, as the revisit step's decisions),
the pages the repeat shard counted in it for the crawl)): what the repeat step sends each
state shard of the update per window and crawl. Every state shard gets the count, with or
without messages. Encoded once here and decoded once when the update applies it: the
messages cross the shuffle and wait in the update's bag as one bytes object (`held_batch`),
not field by field."""


class WindowRoutes:
    """One firing of a repeat shard: the fetches it lets through, routed by the step core
    and gathered per (crawl, window) and state shard of their keys, with the pages counted."""

    def __init__(self, strategy: Strategy[Any], shards: int) -> None:
        self.strategy = strategy
        self.shards = shards
        # (crawl id, due) → [first position, pages, [(key, message), …]]
        self.windows: dict[tuple[str, int], list[Any]] = {}

    def add(
        self, due: int, position: int, crawl_id: str, kind: FetchKind, event: FetchEvent
    ) -> None:
        """Route a fetch the repeat step let through (in (due, position) order): its keyed
        messages with the clock's offset in its window; a first fetch counts a page."""
        window = self.windows.get((crawl_id, due))
        if window is None:
            window = self.windows[(crawl_id, due)] = [position, 0, []]
        clock = crawl_clock(0, kind != FetchKind.FIRST, event.fetched_at)
        window[1] += clock.crawled
        routed, offset, now_ms = window[2], clock.crawled, clock.now_ms
        messages = keyed_messages(self.strategy, event, kind == FetchKind.REPEAT)
        for index, (key, message) in enumerate(messages):
            routed.append((key, (due, position, index, offset, now_ms, message_tuple(message))))

    def items(self) -> Iterator[tuple[int, HeldBatch]]:
        """`RoutedWindow`s of every (crawl, window) (`window_items`)."""
        for (crawl_id, due), (position, pages, routed) in self.windows.items():
            yield from window_items(due, position, crawl_id, pages, routed, self.shards)


def window_items(
    due: int,
    position: int | None,
    crawl_id: str | None,
    pages: int,
    routed: list[tuple[str, Any]],
    shards: int,
) -> Iterator[tuple[int, HeldBatch]]:
    """A window's (key, message)s as `RoutedWindow`s, gathered per state shard of their key
    (`by_state_shard`), with the pages counted — to every state shard when a page was
    counted, else only to the shards with messages. A position None is each shard's first
    message's (the revisit step's decisions, which count no page and read no clock)."""
    by_shard = by_state_shard(routed, shards)
    for shard in range(shards) if pages else sorted(by_shard):
        messages = by_shard.get(shard, [])
        at = min(m[1] for _, m in messages) if position is None else position
        by_url = shard_batch(messages)[2] if messages else {}
        yield shard, held_batch(due, at, (by_url, {}, crawl_id, pages))


def by_state_shard(
    routed: Iterable[tuple[str, Any]], shards: int
) -> dict[int, list[tuple[str, Any]]]:
    """(key, message)s gathered per state shard of their key, in their order."""
    out: dict[int, list[tuple[str, Any]]] = {}
    for key, message in routed:
        out.setdefault(state_shard(key, shards), []).append((key, message))
    return out
