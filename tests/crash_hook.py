"""The crash the kill -9 tests inject: a `before_commit` hook that SIGKILLs its own process
the `nth` time the engine reaches `phase`. The child processes those tests start import it
(`CHILD_PRELUDE` puts this folder on their path)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

CHILD_PRELUDE = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
"""The first line of a child script that calls `kill_at`."""


def kill_at(phase: str, nth: int) -> Callable[[str], None]:
    seen = 0

    def hook(reached: str) -> None:
        nonlocal seen
        if reached == phase:
            seen += 1
            if seen == nth:
                os.kill(os.getpid(), signal.SIGKILL)

    return hook
