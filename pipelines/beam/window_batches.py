"""A URL-state shard's buffered items in the unbounded form (`beam.stream`): a clock
window's routed messages with the pages counted (one item per repeat shard), the pauses its
answers began (one item per host shard) and its revisit decisions, each held as a batch;
when due, the messages get their crawl clock, the batches are merged to one per window,
each message once, and cut into runs by the windows that began pauses. Pure functions over plain
tuples, so they are tested without a runner."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from apache_beam.coders import FastPrimitivesCoder

from frontierflow.pipelines.beam.hosts import PAUSES, WindowPauses

Batch = tuple[dict[str, list[tuple[Any, ...]]], WindowPauses, str | None, int]
"""A held item of the per-URL update: (url → its messages, the pauses its window's answers
began, the crawl its messages' clocks count in (None: they read no clock), the pages the
item counts in its window for that crawl)."""


BATCH_CODER = FastPrimitivesCoder()
"""How a `Batch` crosses the shuffle and waits in the update's bag: encoded once, by the
step that sends it (`held_batch`), decoded once, when the update takes it."""

HeldBatch = tuple[int, int, bytes]
"""(due, first position, the encoded `Batch`): one item the per-URL update holds."""


def held_batch(due: int, position: int, batch: Batch) -> HeldBatch:
    """`batch` as the update holds it, encoded by the step that sends it: the repeat step
    for its routed windows (`beam.routing.window_items`), `window_batch` for a host shard's
    pauses."""
    return due, position, BATCH_CODER.encode(batch)


def window_batch(item: tuple[int, int, Any]) -> HeldBatch:
    """One item the per-URL update receives as a `HeldBatch`: a `beam.routing.RoutedWindow`
    for the shard, as it came (a repeat shard's messages with the pages it counted, their
    clocks offsets in their window, `with_crawl_clock`; or the revisit step's decisions),
    or a host shard's (due, `PAUSES`, {group: [pause, …]}), encoded here. A window's
    batches are merged when due (`one_per_window`)."""
    due, position, body = item
    if position == PAUSES:
        return held_batch(due, PAUSES, ({}, body, None, 0))
    return item


def with_crawl_clock(
    batches: list[tuple[int, int, dict[str, list[tuple[Any, ...]]], WindowPauses, str | None, int]],
    counted: dict[str, int],
) -> list[tuple[int, int, dict[str, list[tuple[Any, ...]]], WindowPauses]]:
    """A shard's due batches (due, position, url → messages, pauses, crawl, pages) in (due,
    position) order, with each message's clock set: a window's messages of a crawl see the
    pages `counted` for it in the windows before theirs, before(w), plus their offset in the
    window (1 for a first fetch, which counts itself: `core.step.crawl_clock`); then the
    window's own pages are added to `counted` (every repeat shard sends every state shard
    its count, so each shard keeps the crawl's running count itself). `counted` is the
    shard's count through the windows taken before, and is updated in place."""
    out: list[tuple[int, int, dict[str, list[tuple[Any, ...]]], WindowPauses]] = []
    start = 0
    while start < len(batches):
        due, end = batches[start][0], start
        while end < len(batches) and batches[end][0] == due:
            _, at, by_url, pauses, crawl_id, _ = batches[end]
            before = counted.get(crawl_id, 0) if crawl_id is not None else 0
            if before:
                by_url = {
                    url: [(d, p, i, before + c, n, m) for d, p, i, c, n, m in messages]
                    for url, messages in by_url.items()
                }
            out.append((due, at, by_url, pauses))
            end += 1
        for *_, crawl_id, pages in batches[start:end]:
            if pages:
                assert crawl_id is not None  # only a repeat shard counts pages
                counted[crawl_id] = counted.get(crawl_id, 0) + pages
        start = end
    return out


def merge_pauses(pauses: WindowPauses, begun: WindowPauses) -> None:
    """Add to `pauses` the pauses `begun` holds that it does not hold yet."""
    for key, ps in begun.items():
        kept = pauses.setdefault(key, [])
        kept.extend(p for p in ps if p not in kept)


def shard_batch(
    messages: Iterable[tuple[str, tuple[Any, ...]]],
) -> tuple[int, int, dict[str, list[tuple[Any, ...]]]]:
    """A shard's (url, message)s of one clock window, each message (due, position, index,
    crawled, now_ms, message), as one buffered item: (due, first position, url → its
    messages in (position, index) order, each once: see `once_each`)."""
    ordered = sorted(messages, key=lambda m: (m[1][1], m[1][2]))
    by_url: dict[str, list[tuple[Any, ...]]] = {}
    for url, message in ordered:
        by_url.setdefault(url, []).append(message)
    first = ordered[0][1]
    return first[0], first[1], {url: once_each(kept) for url, kept in by_url.items()}


def due_messages(
    batches: list[tuple[int, int, dict[str, list[tuple[Any, ...]]]]],
) -> dict[str, list[tuple[Any, ...]]]:
    """The messages of a shard's due batches per URL, each URL's in (due, position, index)
    order, each once (one batch per shard and window: merged only if a window came in
    more than one, or came twice)."""
    if len(batches) == 1:
        return batches[0][2]
    merged: dict[str, list[tuple[Any, ...]]] = {}
    for _, _, by_url in batches:
        for url, messages in by_url.items():
            merged.setdefault(url, []).extend(messages)
    for messages in merged.values():
        messages.sort(key=lambda m: (m[0], m[1], m[2]))
    return {url: once_each(messages) for url, messages in merged.items()}


def once_each(messages: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """A URL's messages in (due, position, index) order with each (due, position, index)
    kept once: that triple names a URL's message. Prism (2.75) now and then delivers a
    step's output twice — a routed window's messages, or a grouped batch — (an open Beam
    issue about timer callbacks and bundle splits, apache/beam#35771), and a strategy's
    update is not idempotent (IECA's is not)."""
    kept = messages[:1]
    for message in messages[1:]:
        if message[:3] != kept[-1][:3]:
            kept.append(message)
    return kept


def one_per_window(
    batches: list[tuple[int, int, dict[str, list[tuple[Any, ...]]], WindowPauses]],
) -> list[tuple[int, int, dict[str, list[tuple[Any, ...]]], WindowPauses]]:
    """A shard's due batches (due, position, url → messages, pauses begun), in (due,
    position) order, merged to one per window: a window comes as one item from each routing
    shard that has messages for the shard and from each host shard whose answers began
    pauses. Each URL's messages in (position, index) order, each once; the pauses of every
    item kept (the position: the window's first)."""
    merged: list[tuple[int, int, dict[str, list[tuple[Any, ...]]], WindowPauses]] = []
    start = 0
    while start < len(batches):
        end = start + 1
        while end < len(batches) and batches[end][0] == batches[start][0]:
            end += 1
        if end == start + 1:
            merged.append(batches[start])
        else:
            window = batches[start:end]
            pauses: WindowPauses = {}
            for *_, begun in window:
                merge_pauses(pauses, begun)
            by_url = due_messages([(due, at, messages) for due, at, messages, _ in window])
            merged.append((window[0][0], window[0][1], by_url, pauses))
        start = end
    return merged


def pause_runs(
    batches: list[tuple[int, int, dict[str, list[tuple[Any, ...]]], WindowPauses]],
) -> Iterator[tuple[WindowPauses, list[tuple[int, int, dict[str, list[tuple[Any, ...]]]]]]]:
    """A shard's due batches (due, position, url → messages, pauses begun) in runs that
    each start at a window that began pauses: (those pauses, the run's batches). An entry
    is held by the pauses begun in its window or before (never by a later window's,
    whatever its times), so the batches of one run are applied together, with every pause
    known at its first window."""
    run: list[tuple[int, int, dict[str, list[tuple[Any, ...]]]]] = []
    pauses: WindowPauses = {}
    for due, at, by_url, begun in batches:
        if begun and run:
            yield pauses, run
            run = []
        if begun:
            pauses = begun
        elif not run:
            pauses = {}
        run.append((due, at, by_url))
    if run:
        yield pauses, run
