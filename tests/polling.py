"""The one way a test waits for something another thread or process does: poll a condition
with a deadline, and fail with what was awaited when the deadline passes. Nothing waits a
fixed time for a result; the short interval only spaces the checks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

POLL_INTERVAL_S = 0.05


def wait_for(
    condition: Callable[[], T],
    what: str,
    deadline_s: float = 60.0,
    interval_s: float = POLL_INTERVAL_S,
) -> T:
    """`condition()`'s first truthy value; AssertionError naming `what` once `deadline_s`
    has passed without one."""
    end = time.monotonic() + deadline_s
    pause = threading.Event()
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {deadline_s:g} s waiting for {what}")
        pause.wait(interval_s)
