"""The fetcher's view of the frontier: one queue per host, best priority first.

Which queued entries are live is `schemas.frontier_view`'s rule: the latest per
`change_key` (per URL, a reply request per (url, via)); a tombstone removes its own key,
so a URL's tombstone leaves its reply requests alone (schemas/README.md, "Reply
requests"). A host serves one request at a time and not again before its politeness delay
has passed since the previous one ended. Pages fetched in a crawl cycle are remembered: a
later entry for one is dropped, a reply request for one is answered without a download,
and a revisit entry (its echo's `revisit`: the job asks for the page again from its
`not_before`) is downloaded once per due time.

What a host's answers say is the frontier's rule, `state.hosts.host_after_fetch`, applied
here at once to each answer (`release`) and to the downloads recorded on the `fetched`
topic when a fetcher takes a host over (`restore`): no request goes to a host inside a
pause it announced (429/503, `Retry-After`) or a back-off, an entry whose `not_before`
lies ahead waits, a host (or registered domain) whose pages for the cycle are spent gives
none, and an answer that will be asked again (`will_retry`) puts its entry back.

Pattern depth (`state.traps.pattern_depth`): an entry is one deeper than the page it came
`via` when both URLs have one pattern (the same once their numbers are masked), else at 0;
the least over the entries offered for it while it waits (a strategy sends a page again each
time another parent links it). Each page fetched is remembered with its depth, so the
fetcher can drop a page's links of its own pattern when it is too deep in a chain of them
(a calendar, a pager). The depths are rebuilt from the `fetched` topic (each download says
its `depth`).

How a free worker chooses (`spend`): "pages" (the default) takes the best entry of every
host that may be asked, and waits rather than take a worse one from a rested host while
a better one waits for its host's delay, or for a pause that ends within `max_wait_s` —
a page budget goes to the best pages, as the strategy ranks them, not to a trap that
happens to be free; "time" takes the best entry of any rested host, so no worker
idles while a host rests (more pages a second, the order less the strategy's).

How far the fetcher may run ahead of the frontier (`max_lead`): a strategy ranks the
next pages by what the last ones taught it, so a page fetched before the frontier has
read the previous answers is chosen on older knowledge. With `max_lead` N, no entry is
taken while N downloads are in flight or wait for the frontier's word on them (the
tombstone of their URL on the frontier topic, or `lead_timeout_s`); 1 crawls one page at
a time in the strategy's order, as a simulation does. None: no bound.
Queue groups (`group_of`): by default each host (host:port) is its own politeness unit;
given a map from a host to its group (the fetcher's `--group-by ip`: the server's
address), the hosts of one group share one request at a time, one delay and one host
state, so virtual hosts on one server are asked as one server.

Times are wall-clock seconds since the epoch, passed in.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from frontierflow.schemas.frontier_view import FrontierView, Key
from frontierflow.schemas.records import (
    REPLY_ECHO,
    FetchEvent,
    FrontierEntry,
    change_key,
    revisit_due,
)
from frontierflow.state.hosts import (
    DEFAULT_POLICY,
    HostPolicy,
    HostState,
    answer_updates,
    group_key,
    held_until,
    is_deferred,
)
from frontierflow.state.traps import pattern_depth

Queued = tuple[FrontierEntry, int | None]
"""An entry in a host's queue, with the partition it was read from."""
Spend = Literal["pages", "time"]
SPENDS: tuple[Spend, ...] = ("pages", "time")

DEFAULT_LEAD_TIMEOUT_S = 10.0
"""How long a download counts against `max_lead` without the frontier's word on it."""

DEFAULT_MAX_WAIT_S = 60.0
"""Under "pages" spend, how long a better entry may keep a worse one waiting: its host's
delay always, a pause (or a `not_before`) that ends within this many seconds too."""


def is_reply_request(entry: FrontierEntry) -> bool:
    """One parent's request for one page: it must be answered exactly once."""
    return entry.via is not None and REPLY_ECHO in entry.echo


@dataclass(slots=True)
class _Host:
    heap: list[tuple[float, int, Key, Queued]] = field(default_factory=list)
    busy: bool = False
    ready_at: float = 0.0
    delay_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Job:
    """An entry to answer: `download` False means the page was already fetched in the
    entry's cycle (answer with status 208, no request)."""

    entry: FrontierEntry
    download: bool
    partition: int | None = None


class HostQueues:
    """See the module docstring. `group(entry)` is the politeness unit (by default the
    entry's host:port, `host_key`)."""

    def __init__(
        self,
        delay_s: float,
        policy: HostPolicy = DEFAULT_POLICY,
        spend: Spend = "pages",
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        max_lead: int | None = None,
        lead_timeout_s: float = DEFAULT_LEAD_TIMEOUT_S,
        group_of: Callable[[str], str] | None = None,
    ) -> None:
        if spend not in SPENDS:
            raise ValueError(f"spend is one of {SPENDS}, got {spend!r}")
        if max_lead is not None and max_lead < 1:
            raise ValueError(f"max_lead must be >= 1 or None, got {max_lead}")
        self.delay_s = delay_s
        self.policy = policy
        self.spend = spend
        self.max_wait_s = max_wait_s
        self.max_lead = max_lead
        self.lead_timeout_s = lead_timeout_s
        self.group_of = group_of
        """host:port → its queue group; None: every host is its own."""
        self._host_delays: dict[str, float] = {}
        """host:port → its robots.txt Crawl-delay."""
        self._awaiting: dict[str, float] = {}
        """URL downloaded → when: the frontier's word on it has not come yet (`max_lead`)."""
        self._entries: FrontierView[Queued] = FrontierView()
        self._hosts: dict[str, _Host] = {}
        self._seq = itertools.count()
        self._fetched: set[tuple[str, int, str]] = set()
        self._revisited: dict[tuple[str, str], int] = {}
        """(crawl id, URL) → the due time of the latest revisit of the page downloaded."""
        self._attempts: dict[tuple[str, int, str], int] = {}
        self._depths: dict[tuple[str, str], int] = {}
        """(crawl id, URL) → its pattern depth, for the pages fetched at depth > 0."""
        self._queued_depths: dict[Key, int] = {}
        """Record key → the least depth of the entries offered for it, until answered."""
        self.states: dict[str, HostState] = {}
        """`group_key(crawl, host)` (and `domain_key(crawl, domain)`) → what the host rule
        made of the answers so far."""
        self.in_flight = 0

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def host_key(entry: FrontierEntry) -> str:
        return urlsplit(entry.url).netloc.lower() or entry.host

    def group(self, entry: FrontierEntry) -> str:
        """The entry's queue group: its host:port, or the group `group_of` gives it."""
        netloc = self.host_key(entry)
        return netloc if self.group_of is None else self.group_of(netloc)

    def _state_group(self, url: str, host: str) -> str | None:
        """The host-state group of a page (None: its host, the rule's default)."""
        if self.group_of is None:
            return None
        return self.group_of(urlsplit(url).netloc.lower() or host)

    def state_of(self, event: FetchEvent) -> HostState | None:
        """The host state the rule keeps for the event's queue group."""
        group = self._state_group(event.url, event.host)
        return self.states.get(group_key(event.crawl_id, event.host if group is None else group))

    def was_fetched(self, entry: FrontierEntry) -> bool:
        return (entry.crawl_id, entry.cycle, entry.url) in self._fetched

    def _done(self, entry: FrontierEntry) -> bool:
        """Whether a plain entry asks for nothing more: its page was fetched in its cycle,
        or, for a revisit, that revisit (or a later one) was downloaded."""
        due = revisit_due(entry.echo)
        if due is None:
            return self.was_fetched(entry)
        return due <= self._revisited.get((entry.crawl_id, entry.url), -1)

    def offer(self, entry: FrontierEntry, partition: int | None = None) -> bool:
        """Queue (or replace) an entry; False when it is dropped (a page already fetched in
        its cycle that is not a reply request or a revisit not downloaded yet). A revisit
        entry is also the frontier's word on the page's last download (`max_lead`)."""
        if not is_reply_request(entry) and self._done(entry):
            self._entries.tombstone(entry.url)  # the page's reply requests stay
            self._queued_depths.pop(entry.url, None)
            return False
        if revisit_due(entry.echo) is not None:
            self._awaiting.pop(entry.url, None)
        key = change_key(entry)
        queued = (entry, partition)
        self._entries.put(key, queued)
        depth = self._depth_of(entry.crawl_id, entry.url, entry.via)
        before = self._queued_depths.get(key)
        self._queued_depths[key] = depth if before is None else min(before, depth)
        group = self.group(entry)
        host = self._hosts.get(group)
        if host is None:
            host = self._hosts[group] = _Host(delay_s=self.delay_s)
        heapq.heappush(host.heap, (-entry.priority, next(self._seq), key, queued))
        return True

    def remove(self, url: str) -> None:
        """A tombstone of a URL: its entry goes, its reply requests stay."""
        self.remove_key(url)

    def remove_key(self, key: Key) -> None:
        """A tombstone of a record key: a URL's entry (the frontier has read its page's
        answer), or one answered reply request."""
        self._entries.tombstone(key)
        if isinstance(key, str):
            self._awaiting.pop(key, None)
        self._queued_depths.pop(key, None)

    def drop_partitions(self, partitions: set[int]) -> int:
        """Forget entries read from partitions this fetcher no longer owns; how many."""
        gone = [k for k, (_, p) in self._entries.items() if p in partitions]
        for key in gone:
            self._entries.tombstone(key)
            self._queued_depths.pop(key, None)
        return len(gone)

    def set_host_delay(self, host: str, delay_s: float) -> None:
        """A host's own delay (robots.txt Crawl-delay), never below the fetcher's; for its
        whole group (the longest of its hosts' delays)."""
        self._host_delays[host] = delay_s
        if self.group_of is None:
            group, longest = host, delay_s
        else:
            group = self.group_of(host)
            longest = max(d for h, d in self._host_delays.items() if self.group_of(h) == group)
        h = self._hosts.setdefault(group, _Host(delay_s=self.delay_s))
        h.delay_s = max(self.delay_s, longest)

    def depth(self, entry: FrontierEntry) -> int:
        """The entry's pattern depth (see the module docstring): the least offered for its
        record while it waited, else from its own `via`."""
        queued = self._queued_depths.get(change_key(entry))
        if queued is not None:  # its own via counted when it was offered
            return queued
        return self._depth_of(entry.crawl_id, entry.url, entry.via)

    def _depth_of(self, crawl_id: str, url: str, via: str | None) -> int:
        via_depth = 0 if via is None else self._depths.get((crawl_id, via), 0)
        return pattern_depth(url, via, via_depth)

    def _remember_depth(self, crawl_id: str, url: str, depth: int) -> None:
        if depth:
            self._depths[(crawl_id, url)] = depth

    def mark_fetched(self, entry: FrontierEntry) -> None:
        self._fetched.add((entry.crawl_id, entry.cycle, entry.url))
        self._mark_revisited(entry.crawl_id, entry.url, entry.echo)
        self._remember_depth(entry.crawl_id, entry.url, self.depth(entry))
        self._queued_depths.pop(change_key(entry), None)

    def mark_url_fetched(self, crawl_id: str, cycle: int, url: str) -> None:
        """A page downloaded earlier (by this or another fetcher) in that cycle."""
        self._fetched.add((crawl_id, cycle, url))

    def _mark_revisited(self, crawl_id: str, url: str, echo: dict[str, str]) -> None:
        due = revisit_due(echo)
        if due is not None and due > self._revisited.get((crawl_id, url), -1):
            self._revisited[(crawl_id, url)] = due

    def take(self, now: float) -> tuple[Job | None, float | None]:
        """The best entry that may be fetched now (see the module docstring), with its
        host marked busy (call `release` when done); else (None, when to look again, or
        None when only a release or new entries can change the answer). A reply request
        for a page already fetched is served at once, whatever its host is doing."""
        if self.max_lead is not None:
            full, lead_wake = self._lead_full(now)
            if full:
                return None, lead_wake
        now_ms = int(now * 1000)
        best: tuple[float, int, str] | None = None
        waiting: float | None = None  # best priority held back only by a host's delay
        waiting_at: float | None = None
        wake: float | None = None
        for name, host in self._hosts.items():
            head = self._head(host)
            if head is None:
                continue
            entry = head[3][0]
            if is_reply_request(entry) and self.was_fetched(entry):
                heapq.heappop(host.heap)
                self._entries.take(head[2], head[3])
                self._queued_depths.pop(head[2], None)
                return Job(entry, download=False), now
            held = self._held_until(entry, now_ms)
            if held is not None:
                if held > 0:
                    wake = held if wake is None else min(wake, held)
                    if (
                        self.spend == "pages"
                        and held - now <= self.max_wait_s
                        and (waiting is None or head[0] < waiting)
                    ):
                        waiting, waiting_at = head[0], held
                continue
            if host.busy or host.ready_at > now:
                if waiting is None or head[0] < waiting:
                    waiting = head[0]
                    waiting_at = None if host.busy else host.ready_at
                if not host.busy:
                    wake = host.ready_at if wake is None else min(wake, host.ready_at)
                continue
            rank = (head[0], head[1], name)
            if best is None or rank < best:
                best = rank
        if best is None:
            return None, wake
        if self.spend == "pages" and waiting is not None and waiting < best[0]:
            return None, waiting_at  # a better page waits for its host: so do we
        host = self._hosts[best[2]]
        _, _, key, queued = heapq.heappop(host.heap)
        self._entries.take(key, queued)
        entry, partition = queued
        host.busy = True
        self.in_flight += 1
        return Job(entry, download=True, partition=partition), now

    def _lead_full(self, now: float) -> tuple[bool, float | None]:
        """Whether `max_lead` downloads are in flight or awaited, and then when the oldest
        awaited one stops counting (None: only a release can free a place; a tombstone
        may free one sooner)."""
        assert self.max_lead is not None
        cutoff = now - self.lead_timeout_s
        for url in [u for u, at in self._awaiting.items() if at <= cutoff]:
            del self._awaiting[url]
        if self.in_flight + len(self._awaiting) < self.max_lead:
            return False, None
        if not self._awaiting:
            return True, None
        return True, min(self._awaiting.values()) + self.lead_timeout_s

    def _held_until(self, entry: FrontierEntry, now_ms: int) -> float | None:
        """None when `entry` may be fetched now; else when it may (seconds), or 0 when only
        a new cycle can free its host (`state.hosts.held_until`, then the entry's own
        `not_before`)."""
        group = self._state_group(entry.url, entry.host)
        held = held_until(
            self.states.get, entry.crawl_id, entry.host, entry.cycle, now_ms, self.policy, group
        )
        if held is not None:
            return held / 1000
        if entry.not_before is not None and entry.not_before > now_ms:
            return entry.not_before / 1000
        return None

    def may_ask(self, entry: FrontierEntry, now: float) -> bool:
        """Whether `entry`'s host may be asked now by the host rule (its politeness delay
        aside): not paused, its pages for the cycle not spent."""
        return self._held_until(entry, int(now * 1000)) is None

    def retries(self, entry: FrontierEntry, status: int) -> bool:
        """Whether the answer `status` to `entry` is deferred and the page will be asked
        for again (within the policy's tries); counts the try. Its FetchEvent then says
        `will_retry`, and `release` puts the entry back."""
        if not is_deferred(status):
            return False
        key = (entry.crawl_id, entry.cycle, entry.url)
        tries = self._attempts.get(key, 0) + 1
        if tries >= self.policy.max_attempts:
            self._attempts.pop(key, None)
            return False
        self._attempts[key] = tries
        return True

    def observe(self, event: FetchEvent) -> None:
        """The host rule applied to one answer (a download of this or an earlier fetcher)."""
        group = self._state_group(event.url, event.host)
        self.states.update(answer_updates(self.states.get, event, self.policy, group))

    def restore(self, events: Iterable[FetchEvent]) -> None:
        """Downloads recorded on the `fetched` topic for hosts this fetcher takes over, in
        time order: the host rule folded over them, and the pages marked fetched (not the
        deferred ones: their entries are still to fetch)."""
        for event in sorted(events, key=lambda e: e.fetched_at):
            self.observe(event)
            if not event.will_retry:
                self.mark_url_fetched(event.crawl_id, event.cycle, event.url)
                self._mark_revisited(event.crawl_id, event.url, event.echo)
                depth = event.depth
                if depth is None:  # a fetcher that does not count: from its via
                    depth = self._depth_of(event.crawl_id, event.url, event.via)
                self._remember_depth(event.crawl_id, event.url, depth)

    def release(
        self,
        entry: FrontierEntry,
        now: float,
        answer: FetchEvent | None = None,
        partition: int | None = None,
        observed: bool = False,
    ) -> None:
        """The request for `entry` ended at `now`: its host rests for its delay, and what
        the `answer` says of the host is applied, unless it was `observed` already (an
        answer that `will_retry` puts the entry back, held by its host's pause)."""
        host = self._hosts[self.group(entry)]
        host.busy = False
        host.ready_at = now + host.delay_s
        self.in_flight -= 1
        if answer is None:
            return
        if not observed:
            self.observe(answer)
        if self.max_lead is not None and not answer.will_retry and answer.status != 208:
            self._awaiting[entry.url] = now
        if answer.will_retry:
            key = change_key(entry)
            if key not in self._entries:  # not replaced by a newer entry meanwhile
                self.offer(entry, partition)
        else:
            self.mark_fetched(entry)

    def _head(self, host: _Host) -> tuple[float, int, Key, Queued] | None:
        """The host's best live item (stale heap items, replaced or removed, are skipped)."""
        heap = host.heap
        while heap:
            item = heap[0]
            if self._entries.is_current(item[2], item[3]):
                entry = item[3][0]
                if is_reply_request(entry) or not self._done(entry):
                    return item
                self._entries.take(item[2], item[3])  # fetched since it was queued
                self._queued_depths.pop(item[2], None)
            heapq.heappop(heap)
        return None
