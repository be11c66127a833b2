"""A URL-state shard's buffered items in the unbounded form (`beam.stream`): a clock
window's routed messages (one list per routing shard) and the pauses its answers began (one
item per host shard), each held as a batch, merged to one per window when due, each message
once, and cut into runs by the windows that began pauses. Pure functions over plain
tuples, so they are tested without a runner."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from frontierflow.pipelines.beam.hosts import PAUSES, WindowPauses


def window_batch(item: Any) -> tuple[int, int, tuple[Any, WindowPauses]]:
    """One item the per-URL update receives — a routing shard's list of (url, message) for
    the shard, or a host shard's (due, `PAUSES`, {group: [pause, …]}) — as a held batch:
    (due, first position, (url → its messages, the pauses the window's answers began)).
    A window's batches are merged when due (`one_per_window`)."""
    if isinstance(item, tuple):
        return item[0], PAUSES, ({}, item[2])
    due, position, by_url = shard_batch(item)
    return due, position, (by_url, {})


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
