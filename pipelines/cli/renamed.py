"""Names the command line has renamed, still accepted with a one-line note on stderr: the
benchmarks and simulations now grouped under `bench` and `simulate`."""

from __future__ import annotations

import sys

COMMANDS = {
    "bench-kafka": ("bench", "kafka"),
    "bench-beam": ("bench", "beam"),
    "bench-warc": ("bench", "warc"),
    "bench-shard-state": ("bench", "shard-state"),
    "bench-foragers": ("bench", "foragers"),
    "bench-urlfrontier": ("bench", "urlfrontier"),
    "simulate-speed": ("simulate", "speed"),
    "simulate-foragers": ("simulate", "foragers"),
}
"""Old command → (group, member): `frontierflow bench-kafka` is `frontierflow bench kafka`."""


def note(old: str, new: str) -> None:
    """Tell the user, on stderr, that `old` still works but is now called `new`."""
    print(f"frontierflow: '{old}' is deprecated, use '{new}'", file=sys.stderr)
