"""Python's cyclic garbage collector around work that allocates many short-lived
containers and makes no reference cycles: the embedded engine's steps, the Beam replay's
routing and folds."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration of one step, as it was after.

    A step allocates a few container objects per link (messages, their queue entries,
    frontier entries) that live until the step ends and then go by reference counting,
    none of them in a cycle. Left on, the collector runs every 700 allocations and, as
    they pile up, walks every object the process holds, the decoded states of the
    engine's cache among them: measured on `frontierflow bench`, a quarter of IECA's time.
    Off for a step, it runs on the next allocations after it, over what the step left.
    The Beam replay pauses it the same way while it builds and folds a shard (measured:
    decoding a shard's blocks took 2.5× as long with it on).
    A loop of steps pauses it for longer (`StepCollector`).
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
