"""Event time for the unbounded Beam form: the crawl clock's windows, and the ordering of a
stateful step's input by event-time timers.

`ClockWindows` are the fixed windows of `fetched_at` over which the crawl clock is
refreshed (`--clock windowed:W`). A stateful step that must apply its input in a fixed
order buffers it (`hold_unless_taken`) and, when its watermark timer fires, takes what is
due in order (`take_due`), so results do not depend on processing speed or bundling.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter
from sys import getsizeof
from typing import Any

from apache_beam.coders.coders import Coder, NullableCoder, TupleCoder, VarIntCoder
from apache_beam.metrics import Metrics
from apache_beam.transforms.userstate import BagStateSpec
from apache_beam.utils.timestamp import Timestamp

CLOCK_EXACT = "exact"
CLOCK_WINDOWED = "windowed:"


@dataclass(frozen=True, slots=True)
class ClockWindows:
    """Event-time windows of `width_ms` over which the crawl clock is refreshed."""

    width_ms: int

    def __post_init__(self) -> None:
        if not isinstance(self.width_ms, int) or self.width_ms < 1:
            raise ValueError(f"clock window must be a whole number of ms >= 1: {self.width_ms}")

    def due_micros(self, event_ms: int) -> int:
        """The last millisecond of the window holding `event_ms`, in µs: a window's items
        are due then. Not Beam's max_timestamp (end − 1 µs): the Fn API carries timer times
        in milliseconds, and a timer set at end − 1 µs would fire at end − 1 ms."""
        return ((event_ms // self.width_ms + 1) * self.width_ms - 1) * 1000


def window_time_ms(fetched_at: int, stamp: Timestamp, by_arrival: bool) -> int:
    """The time that places an event in its clock window: its `fetched_at`, or with
    `by_arrival` the time its source stamped it with (`beam.kafka_io`: the broker's append
    time). Every keying step of the unbounded form asks this (`place_event`), so they agree
    on windows."""
    return int(stamp.micros) // 1000 if by_arrival else fetched_at


def place_event(
    windows: ClockWindows, fetched_at: int, stamp: Timestamp, by_arrival: bool
) -> tuple[int, Timestamp]:
    """(the due of the event's clock window, the stamp of an item keyed from it for a
    timer-ordered step): the event's own time (`window_time_ms`), never moved back from the
    source's stamp, so at most the due + 999 µs, before a timer 1 ms past the due
    (`REPEAT_AFTER_US`). The repeat, host and speed steps key their items with it."""
    event_ms = window_time_ms(fetched_at, stamp, by_arrival)
    return windows.due_micros(event_ms), Timestamp(micros=max(int(stamp.micros), event_ms * 1000))


def parse_clock(text: str) -> ClockWindows | None:
    """`exact` → None (the bounded pipeline); `windowed:W` → windows of W ms."""
    if text == CLOCK_EXACT:
        return None
    if text.startswith(CLOCK_WINDOWED):
        try:
            return ClockWindows(int(text[len(CLOCK_WINDOWED) :]))
        except ValueError as exc:
            raise ValueError(f"--clock {text!r}: {exc}") from exc
    raise ValueError(f"--clock must be 'exact' or 'windowed:W' (W in ms), got {text!r}")


# --- ordering by event-time timers ------------------------------------------------------------

REPEAT_AFTER_US = 1_000
ROUTE_AFTER_US = 2_000
APPLY_AFTER_US = 3_000
"""How far past a clock window's due each timer-ordered step of the unbounded form fires
its timer and stamps what it emits: the repeat step, which routes what it lets through
(`beam.stream`; the host step fires then too, `beam.hosts`), the steps whose output the
update takes beside the routed messages (the host step stamps its pauses there; the
revisit step fires there, `beam.stream_revisits`) and the per-shard update
(`beam.stream_update`).

A runner may fire an event-time timer at T once the watermark *reaches* T (Flink and Prism
do), while an element stamped T may still come: the upstream step whose timer at T holds
the watermark there has yet to emit it. So every step fires 1 ms (the grain of timer times)
after the latest stamp of what it waits for, and stamps its own output at its timer: a
fetch is stamped at its own time, at most its window's due + 999 µs; the repeat step fires
1 ms past the due (the window's routed messages and page counts stamped there); the
revisit step 2 ms past (its decisions and the host step's pauses stamped there); the update
3 ms past. With a timer at its items' own
stamp, an item Prism delivered just then was taken a window late, behind the next step's
watermark (`docs/RESULTS.md`)."""

HELD_STATE = "held"
PENDING_STATE = "pending"
# Each timer-ordered step declares its own HELD cell, PENDING bag and TIMER specs and its own
# `process`: Beam keeps one on_timer callback per TimerSpec object, so the steps cannot
# share one spec (and a shared `process` would have to name it). Each timer has a name of
# its own too: the local runner keeps a stage's written timers in one buffer per timer
# family name, so two fused steps with a timer of the same name would share it.
# `hold_unless_taken`, `take_due` and `keep_taken` are the shared part.


def held_coder(value: Coder) -> Coder:
    """The coder of a timer-ordered step's small cell per key: (the step's own value or
    None, the due of the earliest item waiting, or None). The items themselves wait in a
    bag beside it (`pending_spec`)."""
    return TupleCoder([NullableCoder(value), NullableCoder(VarIntCoder())])


def pending_spec(item: Coder) -> BagStateSpec:
    """The bag of a timer-ordered step's items waiting for the watermark, in arrival order.

    A bag, not a list inside the step's cell: an item that comes costs an append of itself,
    where a cell holding every waiting item was written whole at every bundle that brought
    one. On Flink a window's items wait several seconds (each step's watermark lag), so the
    cell grew with the lag and every bundle rewrote it: a cost that grew with the lag it
    caused (`docs/results/beam.md`). The bag is read and rewritten once per firing instead.

    The items keep their bulk encoded (an event's or a batch's bytes, decoded when taken):
    with the SDK's state cache on, every commit of a cached bag is weighed by walking it
    object by object (`objsize`), which for decoded events and messages was a third of the
    worker's bundle time; a bytes object is weighed at once."""
    return BagStateSpec(PENDING_STATE, item)


_DUE = itemgetter(0)
_DUE_ORDER = itemgetter(0, 1)
"""An item's due time, and its place among items: (due, position)."""


SECOND_DELIVERIES = Metrics.counter("frontierflow", "second_deliveries_dropped")
"""Items a timer-ordered step dropped as second deliveries of a window it had taken."""


def taken_before(due: int, through: int | None) -> bool:
    """Whether an item due at `due` belongs to a window its step has already taken (through
    the due `through`): then it is a second delivery (see `each_delivery_once`), to be
    dropped, not held: held, it would wait for a window that has come and gone, count a
    page twice or apply a message twice. Sound because every step's timer fires strictly
    after its items' stamps (see `REPEAT_AFTER_US`): when it fires, no first delivery of an
    item due by then can come."""
    return through is not None and due <= through


def hold_unless_taken(
    item: tuple[Any, ...], cell: Any, pending: Any, timer: Any, after_us: int = 0
) -> None:
    """Keep `item` (its first field: the microsecond it is due; its second: its position)
    in the key's bag until the watermark passes its due + `after_us`; the timer stands
    `after_us` past the earliest due waiting (see `take_due`), and the cell says which, so
    only an item earlier than every other waiting one writes the cell. The cell's value is
    (the step's own value, the due through which it has taken items), as `keep_taken`
    writes it: an item of a window already taken is dropped and counted."""
    value, earliest = cell.read() or (None, None)
    if value is not None and taken_before(item[0], value[1]):
        SECOND_DELIVERIES.inc()
        return
    pending.add(item)
    if earliest is None or item[0] < earliest:
        timer.set(Timestamp(micros=item[0] + after_us))
        cell.write((value, item[0]))


def with_through(value: Coder) -> Coder:
    """The coder of a step's value with the due through which it has taken items
    (`hold_unless_taken`)."""
    return TupleCoder([NullableCoder(value), VarIntCoder()])


def take_due(
    fired: Timestamp, cell: Any, pending: Any, timer: Any, after_us: int = 0
) -> tuple[Any, list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(the step's value, the items due by `fired` − `after_us` in (due, position) order,
    equal ones in arrival order, each once (see `each_delivery_once`), the rest); the timer
    is re-armed for the first of the rest (`after_us` past its due). A caller that took
    items stores what it keeps with `keep_taken`; one that took none leaves the state as it
    is (no write).

    The timer fired, so the watermark passed `fired`: no item due by then can still come.
    A step that must also see what another stateful step emits at a window's due (that
    step's timer holds the watermark there, and Flink fires a timer once the watermark
    reaches its time) waits `after_us` = 1 ms (the grain of timer times) more.
    """
    value, _ = cell.read() or (None, None)
    items = sorted(pending.read(), key=_DUE_ORDER)  # stable: arrival order among equals
    cut = bisect.bisect_right(items, fired.micros - after_us, key=_DUE)
    rest: list[tuple[Any, ...]] = items[cut:]
    if rest:
        timer.set(Timestamp(micros=rest[0][0] + after_us))
    return value, each_delivery_once(items[:cut]), rest


def keep_taken(cell: Any, pending: Any, value: Any, rest: list[tuple[Any, ...]]) -> None:
    """After a firing that took items: the step's new `value` (with the due it has taken
    through, `with_through`) and the items still waiting, `rest` (from `take_due`)."""
    pending.clear()
    for item in rest:
        pending.add(item)
    cell.write((value, rest[0][0] if rest else None))


def each_delivery_once(items: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """`items` (in (due, position) order) without repeats: an item equal to one kept
    before it with the same (due, position) is dropped. Prism (2.75) now and then
    delivers a step's output twice (an open Beam issue about timer callbacks and bundle
    splits, apache/beam#35771); a second delivery of a fetch would count a page twice or
    apply a message twice. Equal items only: two different items of one (due, position)
    (none of the steps makes them) are both kept."""
    kept: list[tuple[Any, ...]] = []
    group = 0  # where the kept items of the current (due, position) start
    for item in items:
        if kept and item[:2] == kept[-1][:2]:
            if item in kept[group:]:
                continue
        else:
            group = len(kept)
        kept.append(item)
    return kept


def cheap_state_cache_accounting() -> None:
    """Make the SDK's user-state cache weigh its entries cheaply. Beam sizes each cached
    value with `objsize.get_deep_size`, which by default excludes everything reachable from
    loaded modules by collecting their globals on every call (~1 ms a call here, most of a
    stateful pipeline's time); our state values reference no module globals, so that walk
    is off. And a bag the cache holds whole is weighed again, all of it, at every append
    (`GlobalCachingStateHandler.extend`): a step's waiting items, hundreds of tuples, at
    every bundle that brings one. `flat_weight` weighs such a list in C-level loops instead
    of the generic graph walk (~6x faster on the steps' items). Called from the stateful
    steps' `setup`; idempotent."""
    import objsize
    from apache_beam.runners.worker import statecache

    objsize.default_settings.update(exclude_modules_globals=False)
    if not isinstance(statecache.get_deep_size, _FlatFirst):
        statecache.get_deep_size = _FlatFirst(statecache.get_deep_size)


_SCALARS = frozenset((bytes, str, int, float, bool, type(None)))
_IS_TUPLE = tuple.__instancecheck__


def flat_weight(value: object) -> int | None:
    """The bytes a list of scalars, or of tuples of scalars, takes: the list, its items and
    their fields, each field counted even where it is an object shared with another item
    (objsize counts those once), so a little more than Beam's weight; None for any other
    value. The state cache's budget is in these bytes."""
    if type(value) is not list:
        return None
    if all(map(_IS_TUPLE, value)):
        fields = list(chain.from_iterable(value))
        if not _SCALARS.issuperset(map(type, fields)):
            return None
        return getsizeof(value) + sum(map(getsizeof, value)) + sum(map(getsizeof, fields))
    if _SCALARS.issuperset(map(type, value)):
        return getsizeof(value) + sum(map(getsizeof, value))
    return None


class _FlatFirst:
    """The state cache's weigher: `flat_weight` where it takes the value, Beam's own
    (`deep`) for everything else."""

    def __init__(self, deep: Callable[..., int]) -> None:
        self.deep = deep

    def __call__(self, *objs: object) -> int:
        if len(objs) == 1:
            weight = flat_weight(objs[0])
            if weight is not None:
                return weight
        return self.deep(*objs)
