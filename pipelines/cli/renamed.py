"""Names the command line has renamed, still accepted with a one-line note on stderr: the
benchmarks and simulations now grouped under `bench` and `simulate`, and the crawl-speed
controllers now named after their method."""

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

CONTROLLERS = {
    "seed003": "hypothesis",
    "seed003-literal": "hypothesis-literal",
}
"""Old crawl-speed controller name → its name after the method (Nandy, Sarkar & Das 2012's
statistical-hypothesis controller)."""


def note(old: str, new: str) -> None:
    """Tell the user, on stderr, that `old` still works but is now called `new`."""
    print(f"frontierflow: '{old}' is deprecated, use '{new}'", file=sys.stderr)


def controller(name: str, option: str) -> str:
    """The current name of the speed controller `name` given to `option`; an old name gets
    its note."""
    new = CONTROLLERS.get(name)
    if new is None:
        return name
    note(f"{option} {name}", f"{option} {new}")
    return new


def controllers(names: tuple[str, ...], option: str) -> tuple[str, ...]:
    """`controller` for each of a comma-separated list's names."""
    return tuple(controller(name, option) for name in names)
