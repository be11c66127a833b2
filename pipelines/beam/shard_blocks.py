"""The bounded replay's last shuffle in blocks: a bucket's messages cross it as one block per
shard of their keys, not one element per key.

Per bucket of the crawl clock, `route_blocks` routes the fetches in input order through the
step core (`crawl_clock`, then the strategy's `route`, or `keyed_messages` for a repeat) and
writes, for each shard of the URL space its keys fall in (`state_shard`), one `Block`: per
fetch its position and clock, its messages other than Links with their keys, and, when the
fetch links to keys of that shard, its `Inlink` once with those children (the Links differ
only in their child, as the embedded engine queues them: `core.step.queue_messages`). Per
shard, `fold_blocks` queues every key's messages in input order (a stable sort by position:
buckets of two crawls may interleave) and folds each key from no state through the step
core's `apply_messages`, out comes one `UrlUpdate` per key as before.

Why: with one element per (bucket, key), a log of 60,000 few-link pages crossed this
shuffle as ~150,000 elements and 263 MB (each Link carrying its child and its parent's URL
again); a runner pays per element (the SDK's and the runner's own work, gRPC, the shuffle's
sort) what it pays here per block. A block holds the primitives `FastPrimitivesCoder`
encodes without pickling: (first position, [page, …]), a page being (position, crawled,
now ms, [(key, message tuple), …], inlink fields or None, [child, …]).

Shards: a fold holds its shard's messages at once, so the count follows the log's size
(`fold_shards`): at least `MIN_FOLD_SHARDS` to spread the folds over workers, one more per
`FOLD_SHARD_BYTES` of log.
"""

from __future__ import annotations

import heapq
import typing
from collections.abc import Iterable
from dataclasses import replace
from operator import itemgetter
from typing import Any

from apache_beam.coders import FastPrimitivesCoder

from frontierflow.pipelines.beam.coders import UrlUpdate
from frontierflow.pipelines.beam.echo_fill import PROBE, echo_at_probe, probe_message
from frontierflow.pipelines.beam.exact_clock import decode_fetch
from frontierflow.pipelines.beam.shard_state import state_shard
from frontierflow.pipelines.core.collector import collector_paused
from frontierflow.pipelines.core.step import (
    FetchKind,
    LatestChanges,
    apply_messages,
    apply_pending,
    crawl_clock,
    echo_fill_key,
    keyed_messages,
)
from frontierflow.pipelines.core.strategy import CrawlClock, Inlink, Message, Queued, Strategy
from frontierflow.schemas.records import FrontierChange

MIN_FOLD_SHARDS = 16
"""Fold shards of a small log: a few per worker slot, so the folds spread."""
FOLD_SHARD_BYTES = 16 << 20
"""Log bytes per fold shard past `MIN_FOLD_SHARDS`: a shard's fold holds the messages of
about this much log (a few hundred MB of Python objects at most)."""

Page = tuple[int, int, int, list[tuple[str, tuple[Any, ...]]], tuple[Any, ...] | None, list[str]]
"""(position, crawled, now ms, [(key, message tuple), …], inlink fields or None, children)."""
Block = tuple[int, list[Page]]
"""(the position of its first fetch, its pages in input order): one shard's part of a bucket."""


def fold_shards(log_bytes: int | None) -> int:
    """Shards of the fold for a log of `log_bytes` (None: unknown, the minimum)."""
    if not log_bytes:
        return MIN_FOLD_SHARDS
    return max(MIN_FOLD_SHARDS, -(-log_bytes // FOLD_SHARD_BYTES))


def message_tuple(message: Message) -> tuple[Any, ...]:
    """A message as it crosses Beam stages: (type name, fields…), primitives only."""
    return (type(message).__name__, *message)


def route_blocks(
    bucket: tuple[str, int],
    fetches: Iterable[tuple[int, int, bytes]],
    strategy: Strategy[Any],
    pages_before: dict[tuple[str, int], int],
    shards: int,
    fills: dict[int, dict[str, str]] | None = None,
) -> list[tuple[int, bytes]]:
    """A bucket's fetches ((position, kind, event bytes)s) in input order with their clocks
    from `pages_before`, routed by the step core: one (shard, encoded `Block`) per shard
    its keys reach. With `fills` (the echo fill), an event without echo gets the one found
    for its position in the last round, after a probe to the key whose state fills it."""
    with collector_paused():
        crawled = pages_before.get(bucket, 0)
        blocks: dict[int, list[Page]] = {}
        shard_of: dict[str, int] = {}
        for position, kind, data in sorted(fetches, key=itemgetter(0)):
            event = decode_fetch(data)
            repeat = kind == FetchKind.REPEAT
            clock = crawl_clock(crawled, kind != FetchKind.FIRST, event.fetched_at)
            crawled = clock.crawled
            head: list[tuple[str, tuple[Any, ...]]] = []
            if fills is not None:
                fill_key = echo_fill_key(strategy, event)
                if fill_key is not None:
                    head.append((fill_key, probe_message(event)))
                    echo = fills.get(position)
                    if echo:
                        event = replace(event, echo=echo)
            inlink: tuple[Any, ...] | None = None
            children: tuple[str, ...] = ()
            if repeat:
                repeated = keyed_messages(strategy, event, True)
                head.extend((key, message_tuple(m)) for key, m in repeated)
            else:
                routed = strategy.route(event)
                head.extend((key, message_tuple(m)) for key, m in routed.head())
                if routed.inlink is not None:
                    inlink, children = tuple(routed.inlink), routed.children
            at = (position, clock.crawled, clock.now_ms)
            _add_page(blocks, shard_of, shards, at, head, inlink, children)
        encoded = [(shard, _BLOCK.encode((ps[0][0], ps))) for shard, ps in blocks.items()]
        del blocks  # freed with the collector off: on again, it would walk them first
    return encoded


def _add_page(
    blocks: dict[int, list[Page]],
    shard_of: dict[str, int],
    shards: int,
    at: tuple[int, int, int],
    head: list[tuple[str, tuple[Any, ...]]],
    inlink: tuple[Any, ...] | None,
    children: tuple[str, ...],
) -> None:
    """One fetch's messages split by the shard of their keys, in order, into `blocks`
    (`shard_of`: the shards of the keys met so far, as a bucket's pages share most links)."""
    parts: dict[int, tuple[list[tuple[str, tuple[Any, ...]]], list[str]]] = {}
    for key, message in head:
        _part(parts, _shard(shard_of, key, shards))[0].append((key, message))
    if inlink is not None:
        get = shard_of.get
        for child in children:
            shard = get(child)
            if shard is None:
                shard = _shard(shard_of, child, shards)
            part = parts.get(shard)
            if part is None:
                part = parts[shard] = ([], [])
            part[1].append(child)
    for shard, (shard_head, shard_children) in parts.items():
        page = (*at, shard_head, inlink if shard_children else None, shard_children)
        blocks.setdefault(shard, []).append(page)


def _shard(shard_of: dict[str, int], key: str, shards: int) -> int:
    shard = shard_of[key] = state_shard(key, shards)
    return shard


def _part(
    parts: dict[int, tuple[list[tuple[str, tuple[Any, ...]]], list[str]]], shard: int
) -> tuple[list[tuple[str, tuple[Any, ...]]], list[str]]:
    part = parts.get(shard)
    if part is None:
        part = parts[shard] = ([], [])
    return part


def seed_blocks(
    seeds: Iterable[tuple[str, Message, CrawlClock]], shards: int
) -> list[tuple[int, bytes]]:
    """Seed messages ((key, message, clock)s in order) as blocks at position −1, before
    every fetch of the log."""
    blocks: dict[int, list[Page]] = {}
    for key, message, clock in seeds:
        head = [(key, message_tuple(message))]
        _add_page(blocks, {}, shards, (-1, clock.crawled, clock.now_ms), head, None, ())
    return [(shard, _BLOCK.encode((-1, pages))) for shard, pages in blocks.items()]


class _Probe(tuple[Any, ...]):
    """A probe in a key's queue: (its event's position, `probe_message`'s tuple)."""


def shard_queues(encoded: Iterable[bytes]) -> dict[str, list[Queued]]:
    """Every key's (clock, message)s from a shard's encoded blocks, in input order: the
    blocks' pages merged by position (blocks of two crawls may interleave), a page's Links
    as one shared (clock, `Inlink`) pair in each child's queue (as
    `core.step.queue_messages` queues them), a probe as a `_Probe`. Call it with the
    collector paused (`collector_paused`): it builds a container or two per message."""
    blocks: list[Block] = [_BLOCK.decode(block) for block in encoded]
    queues: dict[str, list[Queued]] = {}
    get = queues.get
    pages = heapq.merge(*(block_pages for _, block_pages in blocks), key=itemgetter(0))
    for position, crawled, now_ms, head, inlink, children in pages:
        clock = CrawlClock(crawled, now_ms)
        for key, t in head:
            # a `_Probe` stands in a queue only in the echo fill, whose fold reads it
            message: Any = _Probe((position, t)) if t[0] == PROBE else message_of(t)
            item: Queued = (clock, message)
            queue = get(key)
            if queue is None:
                queues[key] = [item]
            else:
                queue.append(item)
        if inlink is not None:
            shared = (clock, _new_tuple(Inlink, inlink))
            for child in children:
                queue = get(child)
                if queue is None:
                    queues[child] = [shared]
                else:
                    queue.append(shared)
    return queues


def fold_blocks(strategy: Strategy[Any], encoded: Iterable[bytes]) -> list[UrlUpdate]:
    """A shard's updates, one per key: its messages in order from no state, with the
    collector paused."""
    with collector_paused():
        queues = shard_queues(encoded)
        updates = _fold_queues(strategy, queues)
        del queues  # freed with the collector off, as in `route_blocks`
    return updates


def _fold_queues(strategy: Strategy[Any], queues: dict[str, list[Queued]]) -> list[UrlUpdate]:
    """A strategy whose changes are all its keys' own (`Strategy.changes_own_key`) folds
    the shard's keys in one `apply_pending`, as the embedded engine folds a step's; any
    other key by key."""
    encode = strategy.encode_state
    if not strategy.changes_own_key:
        updates = []
        for url, queue in queues.items():
            latest: LatestChanges = {}
            state = apply_messages(strategy, url, None, queue, latest)
            encoded_state = None if state is None else encode(state)
            updates.append(UrlUpdate(url, encoded_state, tuple(latest.values())))
        return updates
    states: dict[str, Any] = dict.fromkeys(queues)
    latest = {}
    apply_pending(strategy, queues, states, latest)
    changes: dict[str, list[FrontierChange]] = {}
    for change in latest.values():
        changes.setdefault(change.url, []).append(change)
    return [
        UrlUpdate(url, None if state is None else encode(state), tuple(changes.get(url, ())))
        for url, state in states.items()
    ]


def fold_blocks_probing(
    strategy: Strategy[Any], encoded: Iterable[bytes]
) -> tuple[list[UrlUpdate], list[tuple[str, int, dict[str, str]]]]:
    """`fold_blocks` key by key, answering probes on the way: at a probe the key's state
    as it stands (before the probing event's own messages, which come after it at its
    position) gives the echo of that event (`echo_at_probe`). Returns the updates and
    the (crawl id, position, echo)s found."""
    updates: list[UrlUpdate] = []
    found: list[tuple[str, int, dict[str, str]]] = []
    with collector_paused():
        queues = shard_queues(encoded)
        for url, queue in queues.items():
            latest: LatestChanges = {}
            state = None
            for clock, message in queue:
                if isinstance(message, _Probe):
                    position, probe = message
                    crawl_id, echo = echo_at_probe(strategy, probe, state)
                    if echo:
                        found.append((crawl_id, position, echo))
                    continue
                state = apply_messages(strategy, url, state, ((clock, message),), latest)
            encoded_state = None if state is None else strategy.encode_state(state)
            updates.append(UrlUpdate(url, encoded_state, tuple(latest.values())))
        del queues
    return updates, found


_new_tuple = tuple.__new__
_BLOCK = FastPrimitivesCoder()
"""How a block crosses the shuffle: its primitives (no pickling: a block holds none of
the types the coder would pickle), as bytes the fold decodes with the collector paused."""

_MESSAGE_TYPES: dict[str, Any] = {cls.__name__: cls for cls in typing.get_args(Message)}
_WITH_TUPLES = frozenset(
    name
    for name, cls in _MESSAGE_TYPES.items()
    if any(typing.get_origin(hint) is tuple for hint in typing.get_type_hints(cls).values())
)
"""The messages with a tuple field (`PageSeen`'s links and vector), which a coder may hand
back as a list."""


def message_of(t: tuple[Any, ...]) -> Message:
    """The message a `message_tuple` stands for (lists from a coder become tuples). Every
    field is there, so the tuple's tail is the message's (`_make` checks the count): one
    is built per message on the other side of a shuffle."""
    name = t[0]
    if name in _WITH_TUPLES:
        return _MESSAGE_TYPES[name](*(tuple(f) if isinstance(f, list) else f for f in t[1:]))
    return _MESSAGE_TYPES[name]._make(t[1:])
