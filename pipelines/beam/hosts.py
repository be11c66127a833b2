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
- Unbounded (`PausesInEventTime`): keyed by a shard of the host, a window's answers fold
  into their groups' states on an event-time timer 1 ms past the window's due; the pauses
  they begin go to every URL state shard of the per-URL update, which holds the entries
  emitted inside them as it makes them (`beam.stream`). A shard keeps only the groups
  whose state can still begin or hold a pause (`can_forget`), so its cell stays small
  however many hosts answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from itertools import groupby
from operator import itemgetter
from typing import Any

import apache_beam as beam
from apache_beam import typehints
from apache_beam.coders import BytesCoder, FastPrimitivesCoder, TupleCoder, VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import ReadModifyWriteStateSpec, TimerSpec, on_timer
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils.timestamp import Timestamp

from frontierflow.pipelines.beam.coders import UrlUpdate
from frontierflow.pipelines.beam.event_time import (
    HELD_STATE,
    REPEAT_AFTER_US,
    ROUTE_AFTER_US,
    ClockWindows,
    cheap_state_cache_accounting,
    held_coder,
    hold_unless_taken,
    keep_taken,
    pending_spec,
    place_event,
    take_due,
    with_through,
)
from frontierflow.pipelines.beam.exact_clock import decode_fetch, encode_fetch
from frontierflow.pipelines.beam.shard_state import STATE_SHARDS, state_shard
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.host_pauses import Pause, answer_and_pause, group_pauses, hold_entries
from frontierflow.state.hosts import (
    HostPolicy,
    HostState,
    decode_host_state,
    encode_host_state,
    group_key,
)

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
    order). An answer crosses the grouping as its fields in primitives
    (`exact_clock.encode_fetch`), without its outlinks."""

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
                    (item[0], encode_fetch(answer_of(item[1]))),
                )
            ).with_output_types(typehints.KV[str, typehints.Tuple[int, bytes]])
            | "AnswersByGroup" >> beam.GroupByKey()
            | "Pauses" >> beam.FlatMap(_pauses, self.policy)
        )


def _pauses(
    grouped: tuple[str, Iterable[tuple[int, bytes]]], policy: HostPolicy
) -> Iterator[tuple[str, list[Pause]]]:
    key, answers = grouped
    ordered = (decode_fetch(answer) for _, answer in sorted(answers, key=itemgetter(0)))
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

PAUSES_AFTER_US = REPEAT_AFTER_US
"""The pause step fires 1 ms past a window's due, beside the repeat step: a window's
answers, each stamped at its own time (at most the due + 999 µs), are all in by then, and
the pauses it sends leave stamped 2 ms past (`ROUTE_AFTER_US`), with the window's messages
to the per-URL update, which holds the entries they cover (`beam.stream`)."""

WindowPauses = dict[str, list[Pause]]
"""The pauses one window's answers began, by queue group key."""


class PausesInEventTime(beam.PTransform):
    """Every answer (deferred ones too) → per clock window and URL state shard, the pauses
    that window's answers began: (state shard, (due, `PAUSES`, {group: [pause, …]})),
    stamped 2 ms past the window's due so that they join the window's messages at the
    per-URL update (`beam.stream_update.UpdateFrontierInEventTime`), which holds every entry
    emitted inside a pause there. The group states live here, keyed by a shard of the host
    (`_PausesOfWindows`): one small answer per page goes through this step, not every
    change a page makes (a page's ~30 links made ~30 pieces, and this step held the whole
    form back). Pauses are rare, so each is sent to every URL state shard."""

    def __init__(
        self,
        policy: HostPolicy,
        windows: ClockWindows,
        by_arrival: bool,
        shards: int = STATE_SHARDS,
        url_shards: int = STATE_SHARDS,
    ) -> None:
        super().__init__()
        self.policy = policy
        self.windows = windows
        self.by_arrival = by_arrival
        self.shards = shards
        self.url_shards = url_shards

    def expand(self, answers: Any) -> Any:
        return (
            answers
            | "KeyAnswers"
            >> beam.ParDo(
                _KeyAnswers(self.windows, self.by_arrival, self.shards)
            ).with_output_types(typehints.KV[int, AnswerItem])
            | "PausesOfWindows" >> beam.ParDo(_PausesOfWindows(self.policy))
            | "ToEveryUrlShard" >> beam.FlatMap(_to_every_shard, self.url_shards)
        )


AnswerItem = typehints.Tuple[int, int, bytes]
"""(due, position, the event's bytes without its outlinks), stamped at the event's time."""
PAUSES = -1
"""The position a window's pauses take among the per-URL update's held batches: before
every message of their window (`beam.window_batches.shard_batch`)."""


class _KeyAnswers(beam.DoFn):
    """(position, event) → (its host's shard, (due, position, bytes)), stamped at the
    event's own time (`event_time.place_event`), as `beam.stream`'s repeat step stamps its
    fetches: before the pause step's timer 1 ms past the due."""

    def __init__(self, windows: ClockWindows, by_arrival: bool, shards: int) -> None:
        self.windows = windows
        self.by_arrival = by_arrival
        self.shards = shards

    def process(
        self, item: tuple[int, FetchEvent], stamp: Any = beam.DoFn.TimestampParam
    ) -> Iterator[Any]:
        position, event = item
        due, at = place_event(self.windows, event.fetched_at, stamp, self.by_arrival)
        value = (due, position, encode_fetch(answer_of(event)))
        yield TimestampedValue((state_shard(event.host, self.shards), value), at)


def _to_every_shard(item: tuple[int, WindowPauses], shards: int) -> Iterator[TimestampedValue]:
    due, pauses = item
    stamp = Timestamp(micros=due + ROUTE_AFTER_US)
    for shard in range(shards):
        yield TimestampedValue((shard, (due, PAUSES, pauses)), stamp)


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
) -> tuple[WindowPauses, Groups]:
    """One window of a host shard: its answers (in input order) fold into their groups'
    states and the pauses they begin (`answer_and_pause`). Returns the pauses the window's
    answers began, and the groups kept for the next window: those that `can_forget`
    cannot drop, with the pauses that end after `through_ms`."""
    groups = dict(groups)
    begun: WindowPauses = {}
    for event in answers:
        key = group_key(event.crawl_id, event.host)
        raw, pauses = groups.get(key, (b"", []))
        # a registered domain's count is the fetchers' (its hosts have keys of their own)
        states = {key: decode_host_state(raw) if raw else None}
        updates, pause = answer_and_pause(states.get, event, policy)
        after = updates[0][1]
        if pause:
            begun.setdefault(key, []).append(pause)
        groups[key] = (encode_host_state(after), [*pauses, pause] if pause else pauses)
    kept: Groups = {}
    for key, (raw, pauses) in groups.items():
        live = [p for p in pauses if p[1] > through_ms]
        if live or not can_forget(decode_host_state(raw), through_ms):
            kept[key] = (raw, live)
    return begun, kept


def keep_pauses(live: WindowPauses, begun: WindowPauses, through_ms: int) -> WindowPauses:
    """The pauses that can still hold an entry after the window through `through_ms`: those
    of `live` and `begun` that end after it (an entry of a later window is emitted after
    `through_ms`, so a pause ended by then holds none)."""
    kept: WindowPauses = {}
    for source in (live, begun):
        for key, pauses in source.items():
            for pause in pauses:
                if pause[1] > through_ms and pause not in kept.get(key, ()):
                    kept.setdefault(key, []).append(pause)
    return kept


class _PausesOfWindows(beam.DoFn):
    """Per host shard: its windows' answers held until the watermark passes their due +
    `PAUSES_AFTER_US`; then, window by window, they fold into their groups' states
    (`fold_window`), and each window that began a pause sends them, (due, {group:
    [pause, …]}), stamped at the timer. The cell keeps the groups `fold_window` keeps, and
    the due taken through."""

    HELD = ReadModifyWriteStateSpec(
        HELD_STATE,  # ({group: (host state bytes, pauses)}, the due taken through), and
        held_coder(with_through(FastPrimitivesCoder())),  # the earliest due waiting
    )
    PENDING = pending_spec(TupleCoder([VarIntCoder(), VarIntCoder(), BytesCoder()]))  # answers
    TIMER = TimerSpec("pauses_due", TimeDomain.WATERMARK)

    def __init__(self, policy: HostPolicy) -> None:
        self.policy = policy

    def setup(self) -> None:
        cheap_state_cache_accounting()

    def process(
        self,
        element: tuple[int, tuple[int, int, bytes]],
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> None:
        hold_unless_taken(element[1], held, pending, timer, PAUSES_AFTER_US)

    @on_timer(TIMER)
    def fire(
        self,
        fired: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
        pending: Any = beam.DoFn.StateParam(PENDING),  # noqa: B008
        timer: Any = beam.DoFn.TimerParam(TIMER),  # noqa: B008
    ) -> Iterator[Any]:
        value, ready, rest = take_due(fired, held, pending, timer, PAUSES_AFTER_US)
        if not ready:
            return
        groups: Groups = dict(value[0] if value else {})
        for due, window in groupby(ready, key=itemgetter(0)):
            answers = (decode_fetch(raw) for _, _, raw in window)
            begun, groups = fold_window(groups, answers, due // 1000, self.policy)
            if begun:
                yield TimestampedValue((due, begun), fired)
        keep_taken(held, pending, (groups, ready[-1][0]), rest)
