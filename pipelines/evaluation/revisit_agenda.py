"""Which page a simulated revisit crawl downloads next: the pages given revisits, earliest
due first, and the pages waiting for a probe, the most promising of those due first.

A page is in one of the two at a time; scheduling it again replaces its entry (the heaps
keep stale entries and drop them when they reach the top).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable


class RevisitAgenda:
    """Due times of scheduled revisits and of probes, per URL."""

    def __init__(self) -> None:
        self.due: dict[str, int] = {}
        """Pages given revisits: when each is next due."""
        self.probe_due: dict[str, int] = {}
        """Pages without revisits: when each may next be probed."""
        self._due_heap: list[tuple[int, str]] = []
        self._probe_heap: list[tuple[int, str]] = []
        self._ready: list[tuple[float, int, str]] = []
        """Probes due, the most promising first (`next_probe`)."""

    def clear(self) -> None:
        """Forgets every due time (a new plan schedules every page again)."""
        self.due.clear()
        self.probe_due.clear()
        self._due_heap.clear()
        self._probe_heap.clear()
        self._ready.clear()

    def schedule_due(self, url: str, due: int) -> None:
        """`url` is given revisits, next due at `due` (it waits for no probe)."""
        self.due[url] = due
        self.probe_due.pop(url, None)
        heapq.heappush(self._due_heap, (due, url))

    def schedule_probe(self, url: str, due: int) -> None:
        """`url` has no revisits; it may be probed from `due`."""
        self.probe_due[url] = due
        self.due.pop(url, None)
        heapq.heappush(self._probe_heap, (due, url))

    def first_due(self) -> int | None:
        """When the scheduled page due first is due; None when no page is scheduled."""
        head = _peek(self._due_heap, self.due)
        return None if head is None else head[0]

    def pop_due(self) -> str | None:
        """The scheduled page due first, due or not (every download slot is used), taken
        off the agenda; None when no page is scheduled."""
        if _peek(self._due_heap, self.due) is None:
            return None
        _, url = heapq.heappop(self._due_heap)
        del self.due[url]
        return url

    def next_probe(self, t: int, value: Callable[[str], float]) -> str | None:
        """Of the probes due by `t`, the page of highest `value` (the earliest due among
        equals), taken off the agenda; None when no probe is due."""
        while (head := _peek(self._probe_heap, self.probe_due)) is not None and head[0] <= t:
            due, url = heapq.heappop(self._probe_heap)
            heapq.heappush(self._ready, (-value(url), due, url))
        while self._ready:
            _, due, url = heapq.heappop(self._ready)
            if self.probe_due.get(url) == due:
                del self.probe_due[url]
                return url
        return None


def _peek(heap: list[tuple[int, str]], current: dict[str, int]) -> tuple[int, str] | None:
    """The heap's first entry still current (entries a later schedule replaced are dropped)."""
    while heap:
        due, url = heap[0]
        if current.get(url) == due:
            return heap[0]
        heapq.heappop(heap)
    return None
