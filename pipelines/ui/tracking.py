"""The bounded containers of the operator's page's summary: per-second ring buffers
(`SecondSeries`), the top-priority entries (`TopEntries`) and the queued URLs per host
(`QueuedByHost`). Each has a cap, so the summary does not grow with the crawl."""

from __future__ import annotations

import heapq
import math

from frontierflow.schemas.frontier_view import FrontierView, Key
from frontierflow.schemas.records import FrontierEntry


class SecondSeries:
    """Per-second values over the last `window` seconds, in a ring: `add` sums into the
    current second, `set` keeps the last value of it (a gauge), `peak` the largest."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.values: list[float] = [0.0] * window
        self.stamps: list[int] = [-1] * window

    def _slot(self, second: int) -> int:
        slot = second % self.window
        if self.stamps[slot] != second:
            self.stamps[slot] = second
            self.values[slot] = 0.0
        return slot

    def add(self, second: int, value: float) -> None:
        self.values[self._slot(second)] += value

    def set(self, second: int, value: float) -> None:
        self.values[self._slot(second)] = value

    def peak(self, second: int, value: float) -> None:
        slot = self._slot(second)
        self.values[slot] = max(self.values[slot], value)

    def last(self, now: int) -> list[float | None]:
        """The window's values, oldest first, ending at second `now`; seconds with no
        value are 0 (a rate) — see `last_known` for gauges."""
        out: list[float | None] = []
        for second in range(now - self.window + 1, now + 1):
            slot = second % self.window
            out.append(self.values[slot] if self.stamps[slot] == second else 0.0)
        return out

    def last_known(self, now: int) -> list[float | None]:
        """Like `last`, with None for seconds that had no value (a gauge not measured)."""
        out: list[float | None] = []
        for second in range(now - self.window + 1, now + 1):
            slot = second % self.window
            out.append(self.values[slot] if self.stamps[slot] == second else None)
        return out


class TopEntries:
    """The highest-priority frontier entries the job wrote that are still queued.

    Exact top-K under updates and removals would need the whole frontier; this keeps a
    bounded set of candidates instead (up to 8×K): an entry enters when there is room or it
    beats the lowest kept priority, an update replaces the kept entry of its key, a removal
    or fetch of its URL drops it with its reply requests (`FrontierView.drop_url`). Past
    16×K candidates the lowest are pruned. An entry pruned earlier comes back when the job
    writes it again (every priority change is a new entry), so the shown top is exact unless
    a kept entry's priority later fell below one pruned before. Keys are `change_key`s: a
    URL, or (URL, parent) for a reply request.
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self.keep = 8 * k
        self.view: FrontierView[FrontierEntry] = FrontierView()
        self.candidates = self.view.latest
        """Key → its kept entry (the view's map, read in the summary's loop)."""
        self.replies = self.view.replies
        """URL → its reply-request keys among the candidates."""
        self.floor = -math.inf

    def put(self, key: Key, entry: FrontierEntry) -> None:
        view = self.view
        if key in view.latest or entry.priority > self.floor or len(view) < self.keep:
            view.put(key, entry)
            if len(view) > 2 * self.keep:
                self._prune()

    def drop(self, url: str) -> None:
        """`url` was fetched or removed: its entry and its reply requests leave."""
        self.view.drop_url(url)
        if len(self.view) < self.keep:  # room again: any entry may enter
            self.floor = -math.inf

    def _prune(self) -> None:
        view = self.view
        kept = heapq.nlargest(self.keep, view.items(), key=lambda kv: kv[1].priority)
        view.clear()
        for key, entry in kept:
            view.put(key, entry)
        self.floor = kept[-1][1].priority

    def top(self) -> list[FrontierEntry]:
        return heapq.nlargest(self.k, self.view.values(), key=lambda e: e.priority)


class QueuedByHost:
    """Queued frontier keys per host: a key counts from its first entry until its URL is
    fetched or removed (a tombstone), which drops the URL with its reply requests
    (`FrontierView.drop_url`). Only keys the job wrote since it started are known, and at
    most `cap` of them are tracked; `full` says when new ones were left uncounted. Keys are
    `change_key`s: a URL, or (URL, parent) for a reply request."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.view: FrontierView[str] = FrontierView()
        self.hosts = self.view.latest
        """Tracked key → its host (the view's map, read in the summary's loop)."""
        self.replies = self.view.replies
        """URL → its tracked reply-request keys (a URL several parents asked for: LAFC)."""
        self.counts: dict[str, int] = {}
        self.full = False

    def queued(self, key: Key, url: str, host: str) -> None:
        """A key's entry was written (`url` is the key's URL); counted the first time."""
        if key in self.hosts:
            return
        if len(self.hosts) >= self.cap:
            self.full = True
            return
        self.view.put(key, host)
        self.counts[host] = self.counts.get(host, 0) + 1

    def gone(self, url: str) -> None:
        """`url` was fetched or removed: every key of it leaves its host's queue."""
        counts = self.counts
        for host in self.view.drop_url(url):
            left = counts[host] - 1
            if left:
                counts[host] = left
            else:
                del counts[host]

    def size(self) -> int:
        return len(self.hosts)

    def top(self, n: int) -> list[tuple[str, int]]:
        return heapq.nlargest(n, self.counts.items(), key=lambda hc: (hc[1], hc[0]))
