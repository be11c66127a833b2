"""The URL Frontier service's schedule, in memory: per crawl and queue the URLs' priorities
in a heap, the URLs in flight (locked until `delay_requestable` passes), when the queue last
served, and the host rule's state of every queue (`state.hosts`: what the reports said of
it, what clients set with `BlockQueueUntil`, `SetDelay` and `SetCrawlLimit`).

Nothing here is written to the store. The `Frontier` (`frontier.py`) rebuilds the index from
its records on start and `FrontierRecords` (`records.py`) updates it after every commit, so
it is always what the committed records say, plus the locks, which are not kept across a
restart. Callers hold the frontier's lock.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy, HostState, group_key, held_until
from frontierflow.state.urlfrontier import UrlRecord, UrlStatus


class Slot(NamedTuple):
    """What the scheduler needs of a URL record."""

    priority: float | None
    status: UrlStatus
    refetch_at: int
    created: int
    not_before: int = 0
    """Epoch ms: not handed out before (`UrlRecord.not_before`)."""


@dataclass(slots=True)
class Queue:
    slots: dict[str, Slot] = field(default_factory=dict)
    heap: list[tuple[float, int, str]] = field(default_factory=list)
    inflight: dict[str, float] = field(default_factory=dict)
    """URL → second until which it is locked."""
    last_served: float = float("-inf")
    done: int = 0
    """URLs that will not be fetched again."""


@dataclass(frozen=True, slots=True)
class QueueStats:
    size: int
    in_process: int
    completed: int
    active_queues: int
    queues: int


class QueueIndex:
    """The queues of every crawl, their URLs and host states; see the module docstring."""

    def __init__(self) -> None:
        self.crawls: dict[str, dict[str, Queue]] = {}
        self.queue_of: dict[tuple[str, str], str] = {}
        """(crawl id, URL) → the name of its queue."""
        self.hosts: dict[str, HostState] = {}
        """`state.hosts.group_key(crawl id, queue name)` → the queue's host state, as
        committed: the host rule applied to its reports (a 429 or 503 in
        `fetch.statusCode`, a run of failures pause it; pages count against its limit)
        and what clients set. The empty queue name holds a crawl's default delay."""
        self.policy: HostPolicy = DEFAULT_POLICY
        self._seq = 0

    def queues_of(self, crawl_id: str) -> dict[str, Queue]:
        return self.crawls.get(crawl_id, {})

    def priority(self, crawl_id: str, url: str) -> float | None:
        """The URL's priority; None when it has none or is not indexed."""
        queue = self.queue_of.get((crawl_id, url))
        if queue is None:
            return None
        return self.crawls[crawl_id][queue].slots[url].priority

    def index(self, crawl_id: str, url: str, record: UrlRecord | None) -> None:
        """Put the URL where its (committed) record says; None: it was removed."""
        old = self.queue_of.pop((crawl_id, url), None)
        if old is not None:
            queue = self.crawls[crawl_id][old]
            slot = queue.slots.pop(url)
            queue.done -= slot.status is UrlStatus.DONE
            if not queue.slots:
                del self.crawls[crawl_id][old]
                if not self.crawls[crawl_id]:
                    del self.crawls[crawl_id]
        if record is None:
            return
        queue = self.crawls.setdefault(crawl_id, {}).setdefault(record.queue, Queue())
        slot = Slot(
            record.priority, record.status, record.refetch_at, record.created, record.not_before
        )
        queue.slots[url] = slot
        self.queue_of[(crawl_id, url)] = record.queue
        queue.done += slot.status is UrlStatus.DONE
        if slot.priority is not None and slot.status is not UrlStatus.DONE:
            self._seq += 1
            heapq.heappush(queue.heap, (-slot.priority, self._seq, url))

    def pick(
        self,
        crawls: Sequence[str] | None,
        key: str,
        max_queues: int,
        max_per_queue: int,
        now: float,
        until: float,
    ) -> list[tuple[str, str]]:
        """(crawl id, URL)s due for fetching, best queues first (by their best priority),
        best URLs first within a queue; each locked until `until`."""
        names = list(self.crawls) if crawls is None else list(crawls)
        heads: list[tuple[float, str, str]] = []
        for crawl_id in names:
            queues = self.crawls.get(crawl_id, {})
            for name in [key] if key else list(queues):
                queue = queues.get(name)
                if queue is None:
                    continue
                self._expire_locks(queue, now)
                if not self._queue_open(crawl_id, name, queue, now):
                    continue
                best = self._best(queue, 1, now)
                if best:
                    heads.append((queue.slots[best[0]].priority or 0.0, crawl_id, name))
        heads.sort(key=lambda h: -h[0])
        if max_queues:
            heads = heads[:max_queues]
        picked: list[tuple[str, str]] = []
        for _, crawl_id, name in heads:
            queue = self.crawls[crawl_id][name]
            urls = self._best(queue, max_per_queue or len(queue.slots), now)
            for url in urls:
                queue.inflight[url] = until
            queue.last_served = now
            picked += [(crawl_id, url) for url in urls]
        return picked

    def unlock(self, crawl_id: str, url: str) -> None:
        name = self.queue_of.get((crawl_id, url))
        if name is not None:
            self._unlock_in(self.crawls[crawl_id][name], url)

    def crawl_ids(self) -> list[str]:
        return sorted(c for c, queues in self.crawls.items() if queues)

    def queue_names(self, crawl_id: str, include_inactive: bool, now: float) -> list[str]:
        out = []
        for name, queue in sorted(self.crawls.get(crawl_id, {}).items()):
            if include_inactive or self._queue_active(crawl_id, name, queue, now):
                out.append(name)
        return out

    def stats(self, crawl_id: str, key: str, now: float) -> QueueStats:
        queues = self.crawls.get(crawl_id, {})
        chosen = [(key, queues[key])] if key in queues else [] if key else list(queues.items())
        size = in_process = completed = active = 0
        for _, queue in chosen:
            self._expire_locks(queue, now)
            open_ = sum(1 for s in queue.slots.values() if s.status is not UrlStatus.DONE)
            in_process += len(queue.inflight)
            size += open_ - len(queue.inflight)
            completed += queue.done
            active += 1 if open_ else 0
        return QueueStats(size, in_process, completed, active, len(chosen))

    def _best(self, queue: Queue, n: int, now: float) -> list[str]:
        """Up to `n` servable URLs of `queue`, best first; stale heap items dropped."""
        out: list[str] = []
        keep: list[tuple[float, int, str]] = []
        seen: set[str] = set()
        heap = queue.heap
        while heap and len(out) < n:
            item = heapq.heappop(heap)
            neg, _, url = item
            slot = queue.slots.get(url)
            if slot is None or slot.priority != -neg or url in seen:
                continue  # stale: the URL left, or its priority changed since
            if slot.status is UrlStatus.DONE or url in queue.inflight:
                continue  # pushed again when its lock ends
            seen.add(url)
            keep.append(item)
            if slot.not_before > now * 1000:
                continue  # held: the frontier's entry says not before then
            if slot.status is UrlStatus.QUEUED or slot.refetch_at <= now:
                out.append(url)
        for item in keep:
            heapq.heappush(heap, item)
        return out

    def _expire_locks(self, queue: Queue, now: float) -> None:
        for url, until in list(queue.inflight.items()):
            if until <= now:
                self._unlock_in(queue, url)

    def _unlock_in(self, queue: Queue, url: str) -> None:
        if queue.inflight.pop(url, None) is None:
            return
        slot = queue.slots.get(url)
        if slot is not None and slot.priority is not None and slot.status is not UrlStatus.DONE:
            self._seq += 1
            heapq.heappush(queue.heap, (-slot.priority, self._seq, url))

    def _delay_s(self, crawl_id: str, state: HostState | None) -> float:
        """Seconds between two servings of a queue: its own delay, else the crawl's."""
        if state is not None and state.delay_ms:
            return state.delay_ms / 1000
        default = self.hosts.get(group_key(crawl_id, ""))
        return 0.0 if default is None else default.delay_ms / 1000

    def _queue_open(self, crawl_id: str, name: str, queue: Queue, now: float) -> bool:
        """Whether the queue may serve now: its delay since it last served passed, and the
        host rule lets it be asked (not paused or blocked, its pages for the cycle it
        counts in not spent: `state.hosts.held_until`)."""
        state = self.hosts.get(group_key(crawl_id, name))
        if now < queue.last_served + self._delay_s(crawl_id, state):
            return False
        if state is None and self.policy.domain_page_limit is None:
            return True
        cycle = 0 if state is None else state.cycle
        now_ms = int(now * 1000)
        return held_until(self.hosts.get, crawl_id, name, cycle, now_ms, self.policy) is None

    def _paused(self, crawl_id: str, name: str, now: float) -> bool:
        state = self.hosts.get(group_key(crawl_id, name))
        return state is not None and state.paused(int(now * 1000))

    def _queue_active(self, crawl_id: str, name: str, queue: Queue, now: float) -> bool:
        """Active: holds URLs not completed and is not blocked (due or not)."""
        if self._paused(crawl_id, name, now):
            return False
        return any(s.status is not UrlStatus.DONE for s in queue.slots.values())
