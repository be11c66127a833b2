"""Scheduled revisits (`--revisit`) on the unbounded Beam form (`beam.stream`): the step core's
rule (`pipelines.core.revisit`) in event time, so the schedule is the embedded engine's
whenever `fetched_at` never decreases along the input (as for the rest of the form).

1. The repeat step (`beam.stream.DecideRepeatFetchesByShard`) keeps each page's revisit
   record beside its last cycle and tells a first fetch, a revisit and a repeat apart
   (`page_fetch`); an answer that takes effect leaves as a visit keyed by a shard of its
   host, stamped 1 ms past its window's due, beside the window's fetches.
2. `RevisitsInEventTime`: per host shard, 2 ms past a window's due, the
   window's visits in (due, position) order share their hosts' budgets (`host_due`); each
   URL's latest decision of the window goes to the URL's state shard as one more message
   of the window (`REVISIT_INDEX`), in the routed messages' format, stamped there.
3. The per-URL update (`beam.stream_update.UpdateFrontierInEventTime`) folds each window's
   decision into the URL's changes of that window (`apply_with_revisits`): `with_revisit`,
   as the embedded engine merges a step's revisits, a URL no strategy message reached too.

The host states live in the host step's shard records (`beam.shard_state`), keyed by queue
group; the page records in the repeat step's. Both stay in Beam state, so a checkpoint
holds them and a restore rolls them back with the rest of the job.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import groupby
from operator import itemgetter
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import BytesCoder, FastPrimitivesCoder, TupleCoder, VarIntCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from frontierflow.pipelines.beam.coders import FrontierChangeCoder
from frontierflow.pipelines.beam.event_time import (
    HELD_STATE,
    ROUTE_AFTER_US,
    cheap_state_cache_accounting,
    held_coder,
    hold_unless_taken,
    keep_taken,
    pending_spec,
    take_due,
    with_through,
)
from frontierflow.pipelines.beam.replay import apply_encoded
from frontierflow.pipelines.beam.routing import RoutedWindow, window_items
from frontierflow.pipelines.beam.shard_state import (
    STATE_SHARDS,
    ShardStore,
    records_spec,
    state_shard,
)
from frontierflow.pipelines.core.revisit import page_fetch, revisit_entry, with_revisit
from frontierflow.pipelines.core.step import FetchKind, LatestChanges, keep_latest
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.schemas.records import FetchEvent, FrontierEntry
from frontierflow.state.hosts import group_key
from frontierflow.state.revisit_schedule import (
    RevisitPolicy,
    Visit,
    decode_host_revisits,
    decode_page_schedule,
    encode_host_revisits,
    encode_page_schedule,
    host_due,
)

REVISIT_INDEX = -1
"""The message index of a revisit decision among a window's messages to a URL: the update
step tells it from the strategy's messages (indices from 0) by it."""

VISITS = "visits"
"""The repeat step's output of visits: (host shard, (due, position, `encode_visit` bytes))."""

VisitItem = typehints.KV[int, typehints.Tuple[int, int, bytes]]

_VISIT = FastPrimitivesCoder()
_CHANGE = FrontierChangeCoder()


def encode_visit(visit: Visit) -> bytes:
    """A visit as it waits in the host step's bag (`event_time.pending_spec`: why encoded)."""
    return _VISIT.encode(tuple(visit))


def decode_visit(data: bytes) -> Visit:
    return Visit(*_VISIT.decode(data))


def visit_item(visit: Visit, due: int, position: int, shards: int = STATE_SHARDS) -> Any:
    """A visit keyed for the host step: (host shard, (due, position, bytes))."""
    return state_shard(visit.host, shards), (due, position, encode_visit(visit))


class RevisitsInEventTime(beam.PTransform):
    """Visits (`VisitItem`s stamped 1 ms past their window's due) → per window and URL state
    shard, the URLs' latest revisit decisions as messages of the window, a
    `beam.routing.RoutedWindow` of no crawl and no page whose messages are (url, (due,
    position, `REVISIT_INDEX`, 0, 0, entry bytes or b"")), stamped 2 ms past the due,
    which the update takes with the window's messages (b"": the latest answer downloaded
    nothing, so the strategy's change stands)."""

    def __init__(
        self, policy: RevisitPolicy, strategy: str, url_shards: int = STATE_SHARDS
    ) -> None:
        super().__init__()
        self.policy = policy
        self.strategy = strategy
        self.url_shards = url_shards

    def expand(self, visits: Any) -> Any:
        return visits | "HostBudgets" >> beam.ParDo(
            _HostBudgets(self.policy, self.strategy, self.url_shards)
        ).with_input_types(VisitItem).with_output_types(RoutedWindow)


def window_decisions(
    hosts: dict[str, bytes],
    stored: Mapping[str, bytes],
    visits: Iterable[Visit],
    policy: RevisitPolicy,
    strategy: str,
) -> dict[str, bytes]:
    """One window of a host shard: its visits (in input order) through their hosts'
    budgets (`host_due`). A host's state is read from `hosts` (the states this firing
    changed, group key → encoded state, updated in place) or else from `stored` (the
    shard's records). Returns each URL's latest decision: its revisit entry's bytes, or b""
    when the answer downloaded nothing."""
    latest: dict[str, bytes] = {}
    for visit in visits:
        key = group_key(visit.crawl_id, visit.host)
        raw = hosts[key] if key in hosts else stored.get(key)
        due, host = host_due(None if raw is None else decode_host_revisits(raw), visit, policy)
        hosts[key] = encode_host_revisits(host)
        latest[visit.url] = (
            b"" if due is None else _CHANGE.encode(revisit_entry(visit, due, strategy))
        )
    return latest


class _HostBudgets(beam.DoFn):
    """Per host shard: its windows' visits held until the watermark passes their due +
    `ROUTE_AFTER_US`; then, window by window, `window_decisions`. The hosts' states are the
    shard's records (`beam.shard_state`), the cell holds their generation and the due
    taken through."""

    HELD = ReadModifyWriteStateSpec(HELD_STATE, held_coder(with_through(VarIntCoder())))
    PENDING = pending_spec(TupleCoder([VarIntCoder(), VarIntCoder(), BytesCoder()]))
    RECORDS = records_spec()
    TIMER = TimerSpec("revisits_due", TimeDomain.WATERMARK)

    def __init__(self, policy: RevisitPolicy, strategy: str, url_shards: int) -> None:
        self.policy = policy
        self.strategy = strategy
        self.url_shards = url_shards
        self.store = ShardStore(BytesCoder())

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def process(
        self,
        element: tuple[int, tuple[int, int, bytes]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        hold_unless_taken(element[1], held, pending, timer, ROUTE_AFTER_US)

    @on_timer(TIMER)
    def fire(
        self,
        shard: Any = beam.DoFn.KeyParam,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        records: Any = beam.DoFn.StateParam(RECORDS),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        value, ready, rest = take_due(fired, held, pending, timer, ROUTE_AFTER_US)
        if not ready:
            return
        index = self.store.load(shard, value[0] if value else None, records)
        hosts: dict[str, bytes] = {}
        for due, window in groupby(ready, key=itemgetter(0)):
            positions: dict[str, int] = {}
            visits: list[Visit] = []
            for _, position, raw in window:
                visit = decode_visit(raw)
                positions[visit.url] = position
                visits.append(visit)
            decisions = window_decisions(hosts, index.values, visits, self.policy, self.strategy)
            messages = (
                (url, (due, positions[url], REVISIT_INDEX, 0, 0, entry))
                for url, entry in decisions.items()
            )
            stamp = Timestamp(micros=due + ROUTE_AFTER_US)
            for item in window_items(due, None, None, 0, list(messages), self.url_shards):
                yield TimestampedValue(item, stamp)
        generation = self.store.commit(shard, index, hosts, records)
        keep_taken(held, pending, (generation, ready[-1][0]), rest)


def apply_with_revisits(
    strategy: Strategy[Any], url: str, raw: bytes | None, messages: list[tuple[Any, ...]]
) -> tuple[bytes | None, LatestChanges, bool]:
    """A URL's messages of one or more windows, in (due, position, index) order, revisit
    decisions among them (`REVISIT_INDEX`), applied as the embedded engine applies them step
    by step: window by window, the strategy's messages (`apply_encoded`), then the window's
    decision folded in (`with_revisit`; an empty one leaves the strategy's change), the
    latest change per change key kept over the windows. Returns (the encoded state, the
    latest changes, whether any strategy message was applied)."""
    latest: LatestChanges = {}
    applied = False
    for _, window in groupby(messages, key=itemgetter(0)):
        ordered = list(window)
        strategy_messages = [m for m in ordered if m[2] != REVISIT_INDEX]
        changes: LatestChanges = {}
        if strategy_messages:
            raw, changes = apply_encoded(
                strategy,
                url,
                raw,
                ((crawled, now_ms, m) for *_, crawled, now_ms, m in strategy_messages),
            )
            applied = True
        decisions = [m[5] for m in ordered if m[2] == REVISIT_INDEX]
        if decisions and decisions[-1]:
            entry = _CHANGE.decode(decisions[-1])
            assert isinstance(entry, FrontierEntry)  # a revisit is an entry
            changes[url] = with_revisit(changes.get(url), entry)
        keep_latest(latest, tuple(changes.values()))
    return raw, latest, applied


def revisit_fetch(
    known: tuple[int, bytes] | None, event: FetchEvent, policy: RevisitPolicy
) -> tuple[FetchKind, tuple[int, bytes] | None, Visit | None]:
    """The repeat step's rule with revisits: a page answer's kind, the page's value in the
    step's records after it ((its last crawled cycle, its `PageSchedule` bytes), or None
    for a page never crawled) and the visit its host schedules (`page_fetch`; None for a
    repeat, which changes nothing)."""
    last, raw = known if known is not None else (None, None)
    record = None if raw is None else decode_page_schedule(raw)
    kind, after, visit = page_fetch(record, last, event, policy)
    if visit is None or after is None:
        return kind, known, None
    cycle = event.cycle if kind is FetchKind.FIRST else last
    assert cycle is not None  # a revisit answers a page crawled in its cycle
    return kind, (cycle, encode_page_schedule(after)), visit


def has_revisit(messages: list[tuple[Any, ...]]) -> bool:
    """Whether a URL's messages hold a revisit decision."""
    return any(m[2] == REVISIT_INDEX for m in messages)
