"""The embedded engine's side of scheduled revisits (`--revisit`): one step's revisit records,
read in one batch, changed event by event through the step core's rule
(`pipelines.core.revisit`), written with the step's states, and the step's revisit entries
folded into its frontier changes.

Per URL the page's `PageSchedule` and per host its `HostRevisits` live in the
`revisits` family, committed in the step's write batch with the strategy's states, so a
kill -9 keeps a step's schedule with the rest of it or none of it.
"""

from __future__ import annotations

from collections.abc import Sequence

from frontierflow.pipelines.core.revisit import page_fetch, revisit_entry, with_revisit
from frontierflow.pipelines.core.step import FetchKind, LatestChanges
from frontierflow.schemas.records import FetchEvent, FrontierEntry
from frontierflow.state.hosts import group_key
from frontierflow.state.revisit_schedule import (
    REVISITS_FAMILY,
    HostRevisits,
    PageSchedule,
    RevisitPolicy,
    decode_host_revisits,
    decode_page_schedule,
    encode_host_revisits,
    encode_page_schedule,
    host_due,
    host_revisits_key,
)
from frontierflow.state.storage.store import Transaction


class StepRevisits:
    """One step's revisit working set (module docstring)."""

    def __init__(self, policy: RevisitPolicy, strategy: str, txn: Transaction) -> None:
        self.policy = policy
        self.strategy = strategy
        self.txn = txn
        self.pages: dict[str, PageSchedule | None] = {}
        self.hosts: dict[str, HostRevisits | None] = {}
        self.changed: dict[str, None] = {}
        """URLs whose record the step changed, in order."""
        self.entries: dict[str, FrontierEntry | None] = {}
        """URL → the revisit its latest answer in the step scheduled (None: none, the answer
        was no download)."""
        self.revisits = 0
        """Answers that were revisits."""

    def load(self, urls: Sequence[str]) -> None:
        """Read the records of `urls` not read yet, in one batch."""
        wanted = [u for u in urls if u not in self.pages]
        raw = self.txn.get_many(REVISITS_FAMILY, [u.encode() for u in wanted])
        for url, value in zip(wanted, raw, strict=True):
            self.pages[url] = None if value is None else decode_page_schedule(value)

    def answer(self, last_cycle: int | None, event: FetchEvent) -> FetchKind:
        """A page answer through the rule: its kind, and for a first fetch or a revisit the
        page's record, its host's, and the revisit it schedules."""
        url = event.url
        if url not in self.pages:
            self.load([url])
        kind, page, visit = page_fetch(self.pages[url], last_cycle, event, self.policy)
        if visit is None:
            return kind
        self.revisits += kind is FetchKind.REVISIT
        self.pages[url] = page
        self.changed[url] = None
        key = group_key(visit.crawl_id, visit.host)
        due, self.hosts[key] = host_due(self._host(key), visit, self.policy)
        self.entries[url] = None if due is None else revisit_entry(visit, due, self.strategy)
        return kind

    def _host(self, key: str) -> HostRevisits | None:
        if key not in self.hosts:
            raw = self.txn.get(REVISITS_FAMILY, host_revisits_key(key).encode())
            self.hosts[key] = None if raw is None else decode_host_revisits(raw)
        return self.hosts[key]

    def merge(self, latest: LatestChanges) -> None:
        """The step's revisit entries into its latest changes (`with_revisit`); where the
        latest answer scheduled none, the strategy's change stands."""
        for url, entry in self.entries.items():
            if entry is not None:
                latest[url] = with_revisit(latest.get(url), entry)

    def write(self) -> None:
        """Put the records and host states the step changed into its transaction."""
        puts: list[tuple[bytes, bytes | None]] = []
        for url in self.changed:
            page = self.pages[url]
            if page is not None:
                puts.append((url.encode(), encode_page_schedule(page)))
        for key, host in self.hosts.items():
            if host is not None:
                puts.append((host_revisits_key(key).encode(), encode_host_revisits(host)))
        if puts:
            self.txn.put_many(REVISITS_FAMILY, puts)
