"""The cyclic garbage collector around the engine's steps (`collector_paused`, `StepCollector`)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from frontierflow.pipelines.embedded.engine import StepCollector, collector_paused


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def _cycle() -> weakref.ref[_Node]:
    """A two-object reference cycle nothing else holds: only the collector can free it."""
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    gc.collect()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_step_collector_collects_every_n_steps_and_restores(collector_on: None) -> None:
    with StepCollector(every=3) as collector:
        assert not gc.isenabled()
        garbage = _cycle()
        collector.step_done()
        collector.step_done()
        assert garbage() is not None  # two steps: no collection yet
        collector.step_done()
        assert garbage() is None  # the third step's full collection freed it
        assert collector.steps == 3
    assert gc.isenabled()


def test_step_collector_leaves_a_disabled_collector_disabled(collector_on: None) -> None:
    gc.disable()
    with StepCollector(every=1):
        pass
    assert not gc.isenabled()


def test_collector_paused_inside_a_step_collector_stays_off(collector_on: None) -> None:
    with StepCollector():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the loop's pause outlives the step's
    assert gc.isenabled()


def test_step_collector_refuses_a_zero_interval() -> None:
    with pytest.raises(ValueError, match="interval"):
        StepCollector(every=0)
