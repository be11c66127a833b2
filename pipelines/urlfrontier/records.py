"""The URL Frontier service's records (`state/urlfrontier.py`) in the engine's store, and
their mirror in memory kept equal to what is committed.

The `Frontier` (`frontier.py`) writes in two ways. A plain write batch (`write`), with no
engine step. Or with an engine step (`step`): the service's writes for the step are staged
in the transaction the engine opens (`TxnTap`), and the strategy's frontier changes are
written into that same transaction by the engine's sink (`RecordSink`), so a kill -9 keeps
a whole step — records, strategy state, crawl counters — or none of it. After either, the
in-memory index (`queues.QueueIndex`, and the parents whose outlinks wait) is refreshed
from what was written.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from types import TracebackType

from frontierflow.connectors.base import Sink
from frontierflow.pipelines.embedded.hosts import HOST_PREFIX, host_states, host_store_key
from frontierflow.pipelines.urlfrontier.queues import QueueIndex
from frontierflow.schemas.records import DeadLetter, FrontierChange, FrontierEntry
from frontierflow.state.hosts import (
    HostState,
    decode_host_state,
    encode_host_state,
    group_key,
    set_by_client,
)
from frontierflow.state.storage.store import META_FAMILY, StateStore, Transaction
from frontierflow.state.urlfrontier import (
    PENDING_FAMILY,
    QUEUES_FAMILY,
    URLS_FAMILY,
    PendingOutlinks,
    UrlRecord,
    UrlStatus,
    crawl_key,
    decode_pending,
    decode_queue_settings,
    decode_url_record,
    encode_url_record,
    split_crawl_key,
)

log = logging.getLogger(__name__)

Op = tuple[str, bytes, bytes | None]
"""(family, key, value) to write with a step; None deletes."""


class FrontierRecords:
    """The service's records in `store` and the index of them in memory; see the module
    docstring. Callers hold the frontier's lock."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.tap = TxnTap(store)
        self.index = QueueIndex()
        self.pending_since: dict[tuple[str, str], int] = {}
        """(crawl id, parent URL) → when its first outlink arrived, in epoch ms."""
        self.unknown_entries = 0
        """Strategy entries for URLs the service does not hold (not served)."""
        self._touched: dict[bytes, None] = {}

    def load(self) -> dict[str, list[str]]:
        """Index every record; returns, per crawl, the URLs that wait for a seed step that
        did not commit (no priority, and no parent whose report they wait for)."""
        orphans: dict[str, list[str]] = {}
        waiting: list[tuple[str, str, str]] = []
        for key, value in self.store.items(URLS_FAMILY):
            crawl_id, url = split_crawl_key(key)
            record = decode_url_record(value)
            self.index.index(crawl_id, url, record)
            if record.status is UrlStatus.QUEUED and record.priority is None:
                if record.waiting_for is None:
                    orphans.setdefault(crawl_id, []).append(url)
                else:
                    waiting.append((crawl_id, url, record.waiting_for))
        self.index.hosts = host_states(self.store)
        self._migrate_queue_settings()
        for key, value in self.store.items(PENDING_FAMILY):
            self.pending_since[split_crawl_key(key)] = decode_pending(value).since_ms
        for crawl_id, url, parent in waiting:
            if (crawl_id, parent) not in self.pending_since:
                orphans.setdefault(crawl_id, []).append(url)
        return orphans

    def _migrate_queue_settings(self) -> None:
        """Queue settings kept apart by an older version become host states, once."""
        ops: list[Op] = []
        for key, value in self.store.items(QUEUES_FAMILY):
            crawl_id, name = split_crawl_key(key)
            old = decode_queue_settings(value)
            gkey = group_key(crawl_id, name)
            state = set_by_client(
                self.index.hosts.get(gkey),
                blocked_until_ms=old.blocked_until * 1000 or None,
                delay_ms=None if old.delay is None else old.delay * 1000,
                page_limit=old.crawl_limit or None,
            )
            ops += [(META_FAMILY, host_store_key(gkey), encode_host_state(state)),
                    (QUEUES_FAMILY, key, None)]  # fmt: skip
        if ops:
            self.write(ops)

    def host_op(self, key: str, state: HostState) -> Op:
        """The write of host state `key` (`state.hosts.group_key`)."""
        return (META_FAMILY, host_store_key(key), encode_host_state(state))

    def get(self, key: bytes) -> UrlRecord | None:
        raw = self.store.get(URLS_FAMILY, key)
        return None if raw is None else decode_url_record(raw)

    def pending(self, crawl_id: str, parent: str, now: float) -> PendingOutlinks:
        raw = self.store.get(PENDING_FAMILY, crawl_key(crawl_id, parent))
        if raw is None:
            return PendingOutlinks(since_ms=int(now * 1000))
        return decode_pending(raw)

    def release_children(
        self, crawl_id: str, parent: str, outlinks: Iterable[str], ops: list[Op]
    ) -> list[str]:
        """Stop `parent`'s outlinks waiting for it (ops added); the ones that waited."""
        keys = [crawl_key(crawl_id, u) for u in outlinks]
        released = []
        for url, key, raw in zip(
            outlinks, keys, self.store.get_many(URLS_FAMILY, keys), strict=False
        ):
            if raw is None:
                continue
            record = decode_url_record(raw)
            if record.waiting_for == parent:
                ops.append((URLS_FAMILY, key, encode_url_record(replace(record, waiting_for=None))))
                released.append(url)
        return released

    def step(self, ops: list[Op], run: Callable[[], None]) -> None:
        """Run one engine step with `ops` in its transaction; then refresh the index of
        every record the step wrote."""
        self._touched = {key: None for family, key, _ in ops if family == URLS_FAMILY}
        self.tap.staged = ops
        try:
            run()
        finally:
            self.tap.staged = []
        self._refresh(ops)

    def write(
        self,
        ops: list[Op],
        changes: Sequence[FrontierChange] = (),
        meta: tuple[bytes, bytes] | None = None,
    ) -> None:
        """Commit `ops`, then the frontier `changes` and a `meta` key, in one write batch
        (no engine step) and refresh the index."""
        self._touched = {key: None for family, key, _ in ops if family == URLS_FAMILY}
        with self.store.transaction() as txn:
            _apply(txn, ops)
            self.on_changes(txn, changes)
            if meta is not None:
                txn.put(META_FAMILY, *meta)
        self._refresh(ops)

    def on_changes(self, txn: Transaction, changes: Sequence[FrontierChange]) -> None:
        """The strategy's frontier changes of a step, written into the step's transaction:
        an entry sets its URL's priority, echo, via, cycle and `not_before` (GetURLs does
        not hand the URL out before it); an entry with a `not_before` for a URL fetched for
        good (DONE) brings it back as a REVISIT from then — the frontier's revisit, as a
        client's `refetchable_from_date` would. A removal (the URL was fetched) changes
        nothing: the report that caused it set the status."""
        for change in changes:
            if not isinstance(change, FrontierEntry):
                continue
            key = crawl_key(change.crawl_id, change.url)
            raw = txn.get(URLS_FAMILY, key)
            if raw is None:
                self.unknown_entries += 1
                continue
            record = decode_url_record(raw)
            not_before = change.not_before or 0
            again = not_before > 0 and record.status is UrlStatus.DONE
            updated = replace(
                record,
                priority=change.priority,
                echo=change.echo,
                via=change.via,
                cycle=max(record.cycle, change.cycle),
                waiting_for=None,
                not_before=not_before,
                status=UrlStatus.REVISIT if again else record.status,
            )
            txn.put(URLS_FAMILY, key, encode_url_record(updated))
            self._touched[key] = None

    def _refresh(self, ops: list[Op]) -> None:
        touched = list(self._touched)
        self._touched = {}
        for key, raw in zip(touched, self.store.get_many(URLS_FAMILY, touched), strict=True):
            crawl_id, url = split_crawl_key(key)
            self.index.index(crawl_id, url, None if raw is None else decode_url_record(raw))
        for family, key, value in ops:
            if family == META_FAMILY and key.startswith(HOST_PREFIX):
                host_key = key[len(HOST_PREFIX) :].decode()
                if value is None:
                    self.index.hosts.pop(host_key, None)
                else:
                    self.index.hosts[host_key] = decode_host_state(value)
            elif family == PENDING_FAMILY:
                name = split_crawl_key(key)
                if value is None:
                    self.pending_since.pop(name, None)
                else:
                    self.pending_since[name] = decode_pending(value).since_ms


def _apply(txn: Transaction, ops: Iterable[Op]) -> None:
    for family, key, value in ops:
        if value is None:
            txn.delete(family, key)
        else:
            txn.put(family, key, value)


class TxnTap:
    """The engine's store, handing the engine transactions that already hold the service's
    writes for the step (`staged`) and remembering the open one (`current`) so the sink
    can add the strategy's changes to the same write batch."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self.families = store.families
        self.staged: list[Op] = []
        self.current: Transaction | None = None

    def transaction(self) -> Transaction:
        txn = self._store.transaction()
        _apply(txn, self.staged)
        self.current = txn
        return txn

    def get(self, family: str, key: bytes) -> bytes | None:
        return self._store.get(family, key)

    def get_many(self, family: str, keys: Sequence[bytes]) -> list[bytes | None]:
        return self._store.get_many(family, keys)

    def items(self, family: str) -> Iterator[tuple[bytes, bytes]]:
        return self._store.items(family)

    def estimate_keys(self, family: str) -> int:
        return self._store.estimate_keys(family)

    def close(self) -> None:
        self._store.close()

    def __enter__(self) -> TxnTap:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class RecordSink(Sink):
    """The engine's sink: frontier changes go into the step's transaction as URL records
    (nothing is written outside it, so there is nothing to rewind)."""

    def __init__(self, records: FrontierRecords) -> None:
        self.records = records

    def write(self, changes: Sequence[FrontierChange], dead: Sequence[DeadLetter]) -> None:
        txn = self.records.tap.current
        if txn is None:
            raise RuntimeError("the sink was written outside an engine step")
        for letter in dead:  # checked before the step: not expected
            log.warning("dead letter %s: %s", letter.error_class, letter.message)
        self.records.on_changes(txn, changes)

    def flush(self) -> bytes:
        return b""

    def rewind(self, position: bytes | None) -> None:
        return None
