"""The timer-ordered steps' one state cell: items held until their due time, taken in order."""

from __future__ import annotations

from apache_beam.coders import BytesCoder, FastPrimitivesCoder, VarIntCoder
from apache_beam.utils.timestamp import Timestamp
from beam_state import Cell, Timer

from frontierflow.pipelines.beam.event_time import (
    each_delivery_once,
    held_coder,
    hold_unless_taken,
    take_due,
    with_through,
)


def test_items_wait_in_due_order_and_the_timer_follows_the_earliest() -> None:
    cell, timer = Cell(), Timer()
    hold_unless_taken((2_000, 5, "b"), cell, timer)
    hold_unless_taken((1_000, 9, "a"), cell, timer)  # earlier: the timer moves to it
    hold_unless_taken((2_000, 3, "c"), cell, timer)  # same due, earlier position
    hold_unless_taken((3_000, 1, "d"), cell, timer)  # later: the timer stays
    assert timer.sets == [2_000, 1_000]
    assert cell.value == (
        None,
        [(1_000, 9, "a"), (2_000, 3, "c"), (2_000, 5, "b"), (3_000, 1, "d")],
    )
    assert (cell.reads, cell.writes) == (4, 4)  # one cell per key: one read, one write an item


def test_take_due_returns_the_value_the_ready_items_and_rearms_for_the_rest() -> None:
    cell, timer = Cell(), Timer()
    cell.value = (b"state", [(1_000, 1, "a"), (2_000, 1, "b"), (2_000, 2, "c"), (3_000, 1, "d")])
    value, ready, rest = take_due(Timestamp(micros=2_000), cell, timer)
    assert value == b"state"
    assert ready == [(1_000, 1, "a"), (2_000, 1, "b"), (2_000, 2, "c")]  # due by 2,000 µs
    assert rest == [(3_000, 1, "d")]
    assert timer.sets == [3_000]
    assert cell.writes == 0  # the caller writes its new value with the rest


def test_take_due_on_an_empty_cell_takes_nothing_and_sets_no_timer() -> None:
    cell, timer = Cell(), Timer()
    assert take_due(Timestamp(micros=5_000), cell, timer) == (None, [], [])
    assert timer.sets == []


def test_equal_items_keep_their_arrival_order() -> None:
    cell, timer = Cell(), Timer()
    for tag in "xyz":
        hold_unless_taken((1_000, 4, tag), cell, timer)
    _, ready, _ = take_due(Timestamp(micros=1_000), cell, timer)
    assert [item[2] for item in ready] == ["x", "y", "z"]


def test_held_coder_round_trips_a_value_or_none_with_its_items() -> None:
    coder = held_coder(BytesCoder(), FastPrimitivesCoder())
    for held in ((None, []), (b"\x00\x01", [(1, 2, [("link", 0.5)])])):
        assert coder.decode(coder.encode(held)) == held
    counts = held_coder(VarIntCoder(), VarIntCoder())
    assert counts.decode(counts.encode((7, [1, 2]))) == (7, [1, 2])


def test_a_second_delivery_of_an_item_is_taken_once() -> None:
    """Prism now and then delivers a step's output twice: the copy is held like any item,
    and dropped when the window is taken."""
    cell, timer = Cell(), Timer()
    for item in [(1_000, 4, "a"), (1_000, 2, "b"), (1_000, 4, "a"), (2_000, 1, "c")]:
        hold_unless_taken(item, cell, timer)
    _, ready, rest = take_due(Timestamp(micros=1_000), cell, timer)
    assert ready == [(1_000, 2, "b"), (1_000, 4, "a")]
    assert rest == [(2_000, 1, "c")]


def test_each_delivery_once_keeps_different_items_of_one_place() -> None:
    items = [(1, 1, "x"), (1, 1, "y"), (1, 1, "x"), (1, 2, "x"), (2, 1, "y"), (2, 1, "y")]
    assert each_delivery_once(items) == [(1, 1, "x"), (1, 1, "y"), (1, 2, "x"), (2, 1, "y")]
    assert each_delivery_once([]) == []


def test_an_item_of_a_window_already_taken_is_dropped() -> None:
    """A step that keeps the due through which it has taken items drops a later delivery
    of one of them (or of any item of a taken window) instead of holding it again."""
    cell, timer = Cell(), Timer()
    hold_unless_taken((1_000, 1, "a"), cell, timer)
    _, ready, rest = take_due(Timestamp(micros=1_000), cell, timer)
    cell.write((("v", ready[-1][0]), rest))  # as the steps write it: through 1,000
    hold_unless_taken((1_000, 1, "a"), cell, timer)  # delivered again
    hold_unless_taken((500, 9, "z"), cell, timer)  # of an earlier window
    assert cell.value == (("v", 1_000), []) and timer.sets == [1_000]
    hold_unless_taken((1_001, 2, "b"), cell, timer)  # a later window: held
    assert cell.value == (("v", 1_000), [(1_001, 2, "b")]) and timer.sets == [1_000, 1_001]
    coder = held_coder(with_through(VarIntCoder()), FastPrimitivesCoder())
    for held in (((None, 7), []), ((12, -1), [(1, 2, "x")])):
        assert coder.decode(coder.encode(held)) == held
