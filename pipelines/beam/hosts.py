"""The Beam forms' side of the frontier's host rule: queue groups keyed by their group key,
their pauses from every answer (deferred ones too), and the entries emitted inside a pause
held until it ends.

The rule is `state.hosts`, the one the embedded engine and the fetchers apply: the
group's state after each answer (`answer_updates`, in input order), the pauses it begins
(`state.host_pauses`), and an entry held by the pause under way at its `emitted_at`.
Event time throughout, so both forms hold exactly the entries the embedded engine holds
when `fetched_at` never decreases along the input.

- Bounded (`HoldPausedHosts`): per group, its answers in input order give its pauses
  (a small collection: a pause lasts a minute or more), read by every update as a side
  input.
- Unbounded (`HoldPausedHostsInEventTime`): keyed by a shard of the host, a window's
  answers and the changes its updates made, taken together on an event-time timer 1 ms
  after the per-URL update's. A shard keeps only the groups whose state can still begin
  or hold a pause (`can_forget`), so its cell stays small however many hosts answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from operator import itemgetter
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import BytesCoder, FastPrimitivesCoder, TupleCoder, VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import GlobalWindows, TimestampCombiner, TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from frontierflow.pipelines.beam.coders import UrlUpdate, UrlUpdateCoder
from frontierflow.pipelines.beam.event_time import (
    APPLY_AFTER_US,
    HELD_STATE,
    ClockWindows,
    cheap_state_cache_accounting,
    held_coder,
    hold_unless_taken,
    take_due,
    with_through,
)
from frontierflow.pipelines.beam.io import PositionedEvent
from frontierflow.pipelines.beam.shard_state import STATE_SHARDS, state_shard
from frontierflow.schemas.codecs import decode_record, encode_record
from frontierflow.schemas.records import FetchEvent, FrontierChange, FrontierEntry
from frontierflow.state.host_pauses import Pause, answer_and_pause, group_pauses, hold_entries
from frontierflow.state.hosts import (
    HostPolicy,
    HostState,
    decode_host_state,
    encode_host_state,
    group_key,
)
from frontierflow.state.urls import host_of

HELD_ENTRIES = Metrics.counter("frontierflow", "held_entries")
"""Entries a Beam form held for their group's pause (`frontierflow_held_entries_total` of
the embedded engine)."""


def answer_of(event: FetchEvent) -> FetchEvent:
    """What the host rule reads of an event: the event without its outlinks (a page's links
    are most of its bytes, and no host state depends on them)."""
    return replace(event, outlinks=()) if event.outlinks else event


class GroupPauses(beam.PTransform):
    """Every `(position, FetchEvent)`, deferred answers too → (group key, [pause, …]) for
    each queue group the rule paused (`state.host_pauses.group_pauses` over its answers in input
    order)."""

    def __init__(self, policy: HostPolicy) -> None:
        super().__init__()
        self.policy = policy

    def expand(self, events: Any) -> Any:
        return (
            events
            | "ByGroup"
            >> beam.Map(
                lambda item: (
                    group_key(item[1].crawl_id, item[1].host),
                    (item[0], answer_of(item[1])),
                )
            ).with_output_types(typehints.KV[str, PositionedEvent])
            | "AnswersByGroup" >> beam.GroupByKey()
            | "Pauses" >> beam.FlatMap(_pauses, self.policy)
        )


def _pauses(
    grouped: tuple[str, Iterable[tuple[int, FetchEvent]]], policy: HostPolicy
) -> Iterator[tuple[str, list[Pause]]]:
    key, answers = grouped
    ordered = (event for _, event in sorted(answers, key=itemgetter(0)))
    pauses = group_pauses(ordered, policy).get(key)
    if pauses:
        yield key, pauses


def hold_update(update: UrlUpdate, pauses: Mapping[str, list[Pause]]) -> UrlUpdate:
    """`update` with each entry emitted inside its group's pause held (`held_entry`)."""
    if not pauses:
        return update
    changes, held = hold_entries(update.changes, lambda key: pauses.get(key, ()))
    if changes is None:
        return update
    HELD_ENTRIES.inc(held)
    return replace(update, changes=tuple(changes))


class HoldPausedHosts(beam.PTransform):
    """(every answer, the `UrlUpdate`s) → the updates with the entries of paused groups held:
    the bounded forms' host rule."""

    def __init__(self, policy: HostPolicy) -> None:
        super().__init__()
        self.policy = policy

    def expand(self, pcolls: Any) -> Any:
        answers, updates = pcolls
        pauses = answers | "GroupPauses" >> GroupPauses(self.policy)
        return updates | "Hold" >> beam.Map(
            hold_update, beam.pvalue.AsDict(pauses)
        ).with_output_types(UrlUpdate)


# --- the unbounded form ------------------------------------------------------------------------

HOLD_AFTER_US = APPLY_AFTER_US + 1_000
"""The host step fires 1 ms past the per-URL update's stamp (`event_time.APPLY_AFTER_US`):
a window's answers and the changes its updates made are all in by then."""

PIECES = "pieces"
"""The tag of `_SplitUpdates`' pieces: a URL's changes of one host shard, keyed by it."""


class HoldPausedHostsInEventTime(beam.PTransform):
    """(every answer, the per-window `UrlUpdate`s of `beam.stream`) → (their states, their
    changes) with the entries of paused groups held, in event time: each update leaves as
    its state (at once) and one piece per host shard of its changes
    (`UrlUpdate.carries_state` False), which waits, keyed by that shard, for its window's
    answers (`_HoldInEventTime`). Keyed by a shard of the host, not the host, a window
    touches at most `shards` cells: with a key per host, a page's 30 links on 30 hosts
    made 30 cells, timers and state writes per page, and that stage held the whole form
    back. A URL's changes all go through its host's shard, so a removal never overtakes
    the entry it replaces; a sink writes each of the two as it comes (not through a
    Flatten: Prism may deliver a flattened stage's input again, and a change sent twice
    can land behind a later one)."""

    def __init__(
        self,
        policy: HostPolicy,
        windows: ClockWindows,
        by_arrival: bool,
        shards: int = STATE_SHARDS,
    ) -> None:
        super().__init__()
        self.policy = policy
        self.windows = windows
        self.by_arrival = by_arrival
        self.shards = shards

    def expand(self, pcolls: Any) -> Any:
        answers, updates = pcolls
        keyed = answers | "KeyAnswers" >> beam.ParDo(
            _KeyAnswers(self.windows, self.by_arrival, self.shards)
        ).with_output_types(typehints.KV[int, HostItem])
        split = updates | "SplitUpdates" >> beam.ParDo(_SplitUpdates(self.shards)).with_outputs(
            PIECES, main="states"
        )
        states, pieces = split.states, split[PIECES]
        states.element_type = UrlUpdate
        pieces.element_type = typehints.KV[int, HostItem]
        held = (
            (keyed, pieces)
            | "AnswersAndPieces" >> beam.Flatten()
            | "AtWindowEnd"
            >> beam.WindowInto(
                self.windows.fixed(APPLY_AFTER_US),
                timestamp_combiner=TimestampCombiner.OUTPUT_AT_EARLIEST,
            )
            | "ByShardAndWindow" >> beam.GroupByKey()
            | "OneBatch"
            >> beam.MapTuple(lambda shard, items: (shard, host_batch(items))).with_output_types(
                typehints.KV[int, typehints.Tuple[int, int, bytes]]
            )
            | "ToGlobalWindow" >> beam.WindowInto(GlobalWindows())
            | "HoldInEventTime"
            >> beam.ParDo(_HoldInEventTime(self.policy)).with_output_types(UrlUpdate)
        )
        return states, held


HostItem = typehints.Tuple[int, int, int, bytes]
"""(due, position, kind, bytes): an answer (kind `ANSWER`: the event's bytes without its
outlinks) or a piece of an update (kind `PIECE`: its `UrlUpdateCoder` bytes), both stamped
at their window's due + `APPLY_AFTER_US`."""
ANSWER, PIECE = 0, 1
_UPDATE = UrlUpdateCoder()
_BATCH = FastPrimitivesCoder()


class _KeyAnswers(beam.DoFn):
    """(position, event) → (its host's shard, (due, position, ANSWER, bytes)), stamped at the
    due + `APPLY_AFTER_US` (later, never earlier, than the event: its window is that of
    `beam.stream`'s repeat step)."""

    def __init__(self, windows: ClockWindows, by_arrival: bool, shards: int) -> None:
        self.windows = windows
        self.by_arrival = by_arrival
        self.shards = shards

    def process(
        self, item: tuple[int, FetchEvent], stamp: Any = beam.DoFn.TimestampParam
    ) -> Iterator[Any]:
        position, event = item
        event_ms = int(stamp.micros) // 1000 if self.by_arrival else event.fetched_at
        due = self.windows.due_micros(event_ms)
        value = (due, position, ANSWER, encode_record(answer_of(event)))
        shard = state_shard(event.host, self.shards)
        yield TimestampedValue((shard, value), Timestamp(micros=due + APPLY_AFTER_US))


class _SplitUpdates(beam.DoFn):
    """An update → its state (main output, at once) and, per host shard of its changes, a
    piece (`PIECES`, keyed by the shard); an update without changes leaves whole."""

    def __init__(self, shards: int) -> None:
        self.shards = shards

    def process(self, update: UrlUpdate, stamp: Any = beam.DoFn.TimestampParam) -> Iterator[Any]:
        if not update.changes:
            yield update
            return
        yield replace(update, changes=())
        by_shard: dict[int, list[FrontierChange]] = {}
        for change in update.changes:
            host = change.host if isinstance(change, FrontierEntry) else host_of(change.url)
            by_shard.setdefault(state_shard(host, self.shards), []).append(change)
        due, position, _ = update.version
        for shard, changes in by_shard.items():
            piece = UrlUpdate(update.url, None, tuple(changes), update.version, False)
            value = (due, position, PIECE, _UPDATE.encode(piece))
            yield beam.pvalue.TaggedOutput(PIECES, TimestampedValue((shard, value), stamp))


def host_batch(items: Iterable[tuple[int, int, int, bytes]]) -> tuple[int, int, bytes]:
    """A host shard's answers and pieces of one window as one held item: (due, first
    position, the items in (position, kind) order, encoded)."""
    ordered = sorted(items, key=itemgetter(1, 2))
    return ordered[0][0], ordered[0][1], _BATCH.encode([(p, k, b) for _, p, k, b in ordered])


Groups = dict[str, tuple[bytes, list[Pause]]]
"""A host shard's kept queue groups: group key → (its encoded state, its pauses that can
still hold an entry)."""


def can_forget(state: HostState, through_ms: int) -> bool:
    """Whether a group's state may be dropped after the window through `through_ms`: no
    back-off level, no failure run, no pause past the window. Every answer of a later
    window comes after `through_ms`, and `state.hosts.host_after_fetch` computes a pause
    only from the level, the failure run and the end of the pause under way (the other
    fields count pages and delays), so the pauses that answer begins are the same from
    the dropped state as from none (`pause_begun`: a pause from none ends past its
    answer, as past the dropped one)."""
    return state.level == 0 and state.failures == 0 and state.paused_until <= through_ms


def fold_window(
    groups: Groups,
    answers: Iterable[FetchEvent],
    through_ms: int,
    policy: HostPolicy,
) -> tuple[dict[str, list[Pause]], Groups]:
    """One window of a host shard: its answers (in input order) fold into their groups'
    states and the pauses they begin (`answer_and_pause`). Returns the pauses every entry
    of the window is held by, and the groups kept for the next window: those that
    `can_forget` cannot drop, with the pauses that end after `through_ms`."""
    groups = dict(groups)
    for event in answers:
        key = group_key(event.crawl_id, event.host)
        raw, pauses = groups.get(key, (b"", []))
        # a registered domain's count is the fetchers' (its hosts have keys of their own)
        states = {key: decode_host_state(raw) if raw else None}
        updates, pause = answer_and_pause(states.get, event, policy)
        after = updates[0][1]
        groups[key] = (encode_host_state(after), [*pauses, pause] if pause else pauses)
    held_by = {key: ps for key, (_, ps) in groups.items() if ps}
    kept: Groups = {}
    for key, (raw, pauses) in groups.items():
        live = [p for p in pauses if p[1] > through_ms]
        if live or not can_forget(decode_host_state(raw), through_ms):
            kept[key] = (raw, live)
    return held_by, kept


class _HoldInEventTime(beam.DoFn):
    """Per host shard: its windows' batches held until the watermark passes their due +
    `HOLD_AFTER_US`; then, window by window, the answers fold into their groups' states
    and the pauses they begin (`fold_window`), and each piece leaves with its entries held
    by the pause under way when they were emitted (`held_entry`). The cell keeps the
    groups `fold_window` keeps, and the due taken through."""

    HELD = ReadModifyWriteStateSpec(
        HELD_STATE,  # ({group: (host state bytes, pauses)}, the due taken through), batches
        held_coder(
            with_through(FastPrimitivesCoder()),
            TupleCoder([VarIntCoder(), VarIntCoder(), BytesCoder()]),
        ),
    )
    TIMER = TimerSpec("hosts_due", TimeDomain.WATERMARK)

    def __init__(self, policy: HostPolicy) -> None:
        self.policy = policy

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def process(
        self,
        element: tuple[int, tuple[int, int, bytes]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        hold_unless_taken(element[1], held, timer, HOLD_AFTER_US)

    @on_timer(TIMER)
    def fire(
        self,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        value, batches, rest = take_due(fired, held, timer, HOLD_AFTER_US)
        if not batches:
            return
        groups: Groups = dict(value[0] if value else {})
        for due, _, batch in batches:
            items = _BATCH.decode(batch)
            answers = (decode_record(FetchEvent, raw) for _, kind, raw in items if kind == ANSWER)
            pauses, groups = fold_window(groups, answers, due // 1000, self.policy)
            for _, kind, raw in items:
                if kind == PIECE:
                    yield TimestampedValue(hold_update(_UPDATE.decode(raw), pauses), fired)
        held.write(((groups, batches[-1][0]), rest))
