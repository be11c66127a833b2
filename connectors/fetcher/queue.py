"""The fetcher's view of the frontier: one queue per host, best priority first.

Frontier records replace each other per `change_key` (the latest entry per URL, a reply
request per (url, via)); a tombstone removes the URL's entry but leaves reply requests
alone (schemas/README.md, "Reply requests"). A host serves one request at a time and not
again before its politeness delay has passed since the previous one ended. Pages fetched
in a crawl cycle are remembered: a later entry for one is dropped, a reply request for one
is answered without a download. Pure bookkeeping: the clock is passed in.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from frontierflow.schemas.records import REPLY_ECHO, FrontierEntry, change_key

Key = str | tuple[str, str]


def is_reply_request(entry: FrontierEntry) -> bool:
    """One parent's request for one page: it must be answered exactly once."""
    return entry.via is not None and REPLY_ECHO in entry.echo


@dataclass(slots=True)
class _Host:
    heap: list[tuple[float, int, Key, FrontierEntry]] = field(default_factory=list)
    busy: bool = False
    ready_at: float = 0.0
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Job:
    """An entry to answer: `download` False means the page was already fetched in the
    entry's cycle (answer with status 208, no request)."""

    entry: FrontierEntry
    download: bool


class HostQueues:
    """See the module docstring. `host_key(entry)` is the politeness unit (host:port)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._entries: dict[Key, tuple[FrontierEntry, int | None]] = {}
        self._hosts: dict[str, _Host] = {}
        self._seq = itertools.count()
        self._fetched: set[tuple[str, int, str]] = set()
        self.in_flight = 0

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def host_key(entry: FrontierEntry) -> str:
        return urlsplit(entry.url).netloc.lower() or entry.host

    def was_fetched(self, entry: FrontierEntry) -> bool:
        return (entry.crawl_id, entry.cycle, entry.url) in self._fetched

    def offer(self, entry: FrontierEntry, partition: int | None = None) -> bool:
        """Queue (or replace) an entry; False when it is dropped (a page already fetched in
        its cycle that is not a reply request)."""
        if not is_reply_request(entry) and self.was_fetched(entry):
            self._entries.pop(entry.url, None)
            return False
        key = change_key(entry)
        self._entries[key] = (entry, partition)
        host = self._hosts.get(self.host_key(entry))
        if host is None:
            host = self._hosts[self.host_key(entry)] = _Host(delay_s=self.delay_s)
        heapq.heappush(host.heap, (-entry.priority, next(self._seq), key, entry))
        return True

    def remove(self, url: str) -> None:
        """A tombstone of a URL: its entry goes, its reply requests stay."""
        self._entries.pop(url, None)

    def remove_key(self, key: Key) -> None:
        """A tombstone of a record key: a URL's entry, or one answered reply request."""
        self._entries.pop(key, None)

    def drop_partitions(self, partitions: set[int]) -> int:
        """Forget entries read from partitions this fetcher no longer owns; how many."""
        gone = [k for k, (_, p) in self._entries.items() if p in partitions]
        for key in gone:
            del self._entries[key]
        return len(gone)

    def set_host_delay(self, host: str, delay_s: float) -> None:
        """A host's own delay (robots.txt Crawl-delay), never below the fetcher's."""
        h = self._hosts.setdefault(host, _Host(delay_s=self.delay_s))
        h.delay_s = max(self.delay_s, delay_s)

    def mark_fetched(self, entry: FrontierEntry) -> None:
        self._fetched.add((entry.crawl_id, entry.cycle, entry.url))

    def mark_url_fetched(self, crawl_id: str, cycle: int, url: str) -> None:
        """A page downloaded earlier (by this or another fetcher) in that cycle."""
        self._fetched.add((crawl_id, cycle, url))

    def take(self, now: float) -> tuple[Job | None, float | None]:
        """The best entry of any host that is free and past its delay, with its host marked
        busy (call `release` when done); else (None, when a host becomes ready, or None
        when nothing is queued). A reply request for a page already fetched is served at
        once, whatever its host is doing."""
        best: tuple[float, int, str] | None = None
        wake: float | None = None
        for name, host in self._hosts.items():
            head = self._head(host)
            if head is None:
                continue
            entry = head[3]
            if self.was_fetched(entry):  # a reply request (`_head` drops the others)
                heapq.heappop(host.heap)
                del self._entries[head[2]]
                return Job(entry, download=False), now
            if host.busy:
                continue
            if host.ready_at > now:
                wake = host.ready_at if wake is None else min(wake, host.ready_at)
                continue
            rank = (head[0], head[1], name)
            if best is None or rank < best:
                best = rank
        if best is None:
            return None, wake
        host = self._hosts[best[2]]
        _, _, key, entry = heapq.heappop(host.heap)
        del self._entries[key]
        host.busy = True
        self.in_flight += 1
        return Job(entry, download=True), now

    def release(self, entry: FrontierEntry, now: float) -> None:
        """The request for `entry` ended at `now`: its host rests for its delay."""
        host = self._hosts[self.host_key(entry)]
        host.busy = False
        host.ready_at = now + host.delay_s
        self.in_flight -= 1

    def _head(self, host: _Host) -> tuple[float, int, Key, FrontierEntry] | None:
        """The host's best live item (stale heap items, replaced or removed, are skipped)."""
        heap = host.heap
        while heap:
            item = heap[0]
            live = self._entries.get(item[2])
            if live is not None and live[0] is item[3]:
                if is_reply_request(item[3]) or not self.was_fetched(item[3]):
                    return item
                del self._entries[item[2]]  # fetched since it was queued
            heapq.heappop(heap)
        return None
