"""The timer-ordered steps' state: items held in a bag until their due time, taken in order,
beside a small cell with the step's value and the earliest due waiting."""

from __future__ import annotations

import sys

import objsize
from apache_beam.coders import BytesCoder, VarIntCoder
from apache_beam.utils.timestamp import Timestamp
from beam_state import Bag, Cell, Timer

from frontierflow.pipelines.beam.event_time import (
    cheap_state_cache_accounting,
    each_delivery_once,
    flat_weight,
    held_coder,
    hold_unless_taken,
    keep_taken,
    take_due,
    with_through,
)


def test_items_wait_in_a_bag_and_the_timer_follows_the_earliest() -> None:
    """Each item costs an append of itself; the cell is written only when an item is
    earlier than every other waiting one (the timer moves then, and only then)."""
    cell, bag, timer = Cell(), Bag(), Timer()
    hold_unless_taken((2_000, 5, "b"), cell, bag, timer)
    hold_unless_taken((1_000, 9, "a"), cell, bag, timer)  # earlier: the timer moves to it
    hold_unless_taken((2_000, 3, "c"), cell, bag, timer)  # same due, earlier position
    hold_unless_taken((3_000, 1, "d"), cell, bag, timer)  # later: the timer stays
    assert timer.sets == [2_000, 1_000]
    assert bag.items == [(2_000, 5, "b"), (1_000, 9, "a"), (2_000, 3, "c"), (3_000, 1, "d")]
    assert cell.value == (None, 1_000)
    assert (cell.reads, cell.writes, bag.adds, bag.reads) == (4, 2, 4, 0)


def test_take_due_returns_the_value_the_ready_items_in_order_and_rearms_for_the_rest() -> None:
    cell, bag, timer = Cell(), Bag(), Timer()
    cell.value = (b"state", 1_000)
    bag.items = [(3_000, 1, "d"), (2_000, 2, "c"), (1_000, 1, "a"), (2_000, 1, "b")]
    value, ready, rest = take_due(Timestamp(micros=2_000), cell, bag, timer)
    assert value == b"state"
    assert ready == [(1_000, 1, "a"), (2_000, 1, "b"), (2_000, 2, "c")]  # due by 2,000 µs
    assert rest == [(3_000, 1, "d")]
    assert timer.sets == [3_000]
    assert (cell.writes, bag.clears, bag.adds) == (0, 0, 0)  # the caller keeps what it took


def test_keep_taken_writes_the_value_and_only_the_rest_back() -> None:
    cell, bag, timer = Cell(), Bag(), Timer()
    for item in [(1_000, 1, "a"), (3_000, 1, "d"), (2_000, 1, "b")]:
        hold_unless_taken(item, cell, bag, timer)
    _, ready, rest = take_due(Timestamp(micros=1_000), cell, bag, timer)
    keep_taken(cell, bag, ("v", ready[-1][0]), rest)
    assert cell.value == (("v", 1_000), 2_000) and bag.items == [(2_000, 1, "b"), (3_000, 1, "d")]
    assert timer.at == 2_000
    _, ready, rest = take_due(Timestamp(micros=5_000), cell, bag, timer)
    keep_taken(cell, bag, ("w", ready[-1][0]), rest)
    assert cell.value == (("w", 3_000), None) and bag.items == []  # nothing waits
    hold_unless_taken((4_000, 1, "e"), cell, bag, timer)  # the next item sets the timer
    assert timer.at == 4_000 and cell.value == (("w", 3_000), 4_000)


def test_take_due_on_an_empty_state_takes_nothing_and_sets_no_timer() -> None:
    cell, bag, timer = Cell(), Bag(), Timer()
    assert take_due(Timestamp(micros=5_000), cell, bag, timer) == (None, [], [])
    assert timer.sets == []


def test_equal_items_keep_their_arrival_order() -> None:
    cell, bag, timer = Cell(), Bag(), Timer()
    for tag in "xyz":
        hold_unless_taken((1_000, 4, tag), cell, bag, timer)
    _, ready, _ = take_due(Timestamp(micros=1_000), cell, bag, timer)
    assert [item[2] for item in ready] == ["x", "y", "z"]


def test_held_coder_round_trips_a_value_or_none_with_the_earliest_due() -> None:
    coder = held_coder(BytesCoder())
    for held in ((None, None), (b"\x00\x01", 7), (b"", None)):
        assert coder.decode(coder.encode(held)) == held
    through = held_coder(with_through(VarIntCoder()))
    for held in (((None, 7), None), ((12, -1), 3_000)):
        assert through.decode(through.encode(held)) == held


def test_a_second_delivery_of_an_item_is_taken_once() -> None:
    """Prism now and then delivers a step's output twice: the copy is held like any item,
    and dropped when the window is taken."""
    cell, bag, timer = Cell(), Bag(), Timer()
    for item in [(1_000, 4, "a"), (1_000, 2, "b"), (1_000, 4, "a"), (2_000, 1, "c")]:
        hold_unless_taken(item, cell, bag, timer)
    _, ready, rest = take_due(Timestamp(micros=1_000), cell, bag, timer)
    assert ready == [(1_000, 2, "b"), (1_000, 4, "a")]
    assert rest == [(2_000, 1, "c")]


def test_each_delivery_once_keeps_different_items_of_one_place() -> None:
    items = [(1, 1, "x"), (1, 1, "y"), (1, 1, "x"), (1, 2, "x"), (2, 1, "y"), (2, 1, "y")]
    assert each_delivery_once(items) == [(1, 1, "x"), (1, 1, "y"), (1, 2, "x"), (2, 1, "y")]
    assert each_delivery_once([]) == []


def test_an_item_of_a_window_already_taken_is_dropped() -> None:
    """A step that keeps the due through which it has taken items drops a later delivery
    of one of them (or of any item of a taken window) instead of holding it again."""
    cell, bag, timer = Cell(), Bag(), Timer()
    hold_unless_taken((1_000, 1, "a"), cell, bag, timer)
    _, ready, rest = take_due(Timestamp(micros=1_000), cell, bag, timer)
    keep_taken(cell, bag, ("v", ready[-1][0]), rest)  # through 1,000
    hold_unless_taken((1_000, 1, "a"), cell, bag, timer)  # delivered again
    hold_unless_taken((500, 9, "z"), cell, bag, timer)  # of an earlier window
    assert cell.value == (("v", 1_000), None) and bag.items == [] and timer.sets == [1_000]
    hold_unless_taken((1_001, 2, "b"), cell, bag, timer)  # a later window: held
    assert bag.items == [(1_001, 2, "b")] and timer.sets == [1_000, 1_001]


def test_flat_weight_is_the_deep_size_of_a_list_of_unshared_scalars_or_tuples() -> None:
    # every object distinct (ints above CPython's cached 256, fresh bytes): objsize's walk
    # counts each once, as the flat sum does
    items = [(10_000 + i, 20_000 + i, f"u{i}", bytes([i]) * (100 + i)) for i in range(50)]
    scalars = [bytes([i]) * (30 + i) for i in range(50)]
    for value in (items, scalars, []):
        assert flat_weight(value) == objsize.get_deep_size(value)
    # a shared object is counted at each of its places (objsize counts it once)
    shared = b"x" * 1_000
    twice = [(10_001, shared), (10_002, shared)]
    assert flat_weight(twice) == objsize.get_deep_size(twice) + sys.getsizeof(shared)


def test_flat_weight_leaves_nested_values_to_the_deep_walk() -> None:
    for value in ([(1, [2])], [[1]], {"a": 1}, (1, 2), [(1,), 2], b"x"):
        assert flat_weight(value) is None


def test_the_state_cache_weighs_flat_lists_flat_and_the_rest_as_beam_does() -> None:
    from apache_beam.runners.worker import statecache

    before = statecache.get_deep_size
    # Beam's own weigher, whether or not a stateful step of an earlier test installed ours
    beams = getattr(before, "deep", before)
    statecache.get_deep_size = beams
    try:
        cheap_state_cache_accounting()
        cheap_state_cache_accounting()  # a second step's setup: installed once
        weigh = statecache.get_deep_size
        assert weigh is not beams
        assert weigh.deep is beams  # type: ignore[attr-defined]
        items = [(10_000 + i, bytes([i]) * 64) for i in range(10)]
        assert weigh(items) == flat_weight(items)
        nested = {"a": [10_001, b"y" * 64]}
        assert weigh(nested) == beams(nested)
    finally:
        statecache.get_deep_size = before
