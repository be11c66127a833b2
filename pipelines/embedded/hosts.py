"""The embedded engine's side of the frontier's host rule: where host states live in the
store, and frontier entries of paused hosts held until their pause ends.

The rule itself is `state.hosts` (one function for the job and the fetchers); the step
applies it to each event (`Step.observe_host`) and the engine, before it writes a step's
changes, gives every entry emitted inside its queue group's pause that pause's end as
`not_before` (in event time, so a replay holds the same entries in steps of any size,
and the Beam forms hold the same ones).
"""

from __future__ import annotations

from collections.abc import Mapping

from frontierflow.schemas.records import FrontierChange
from frontierflow.state.host_pauses import Pause, hold_entries
from frontierflow.state.hosts import HostState, decode_host_state
from frontierflow.state.storage.store import META_FAMILY, StateStore

HOST_PREFIX = b"host\x00"
"""Keys of the meta family that hold a queue group's (or a registered domain's)
`HostState`: the prefix, then `state.hosts.group_key` (or `domain_key`)."""


def host_store_key(key: str) -> bytes:
    """The meta-family key of the host state `key` (`group_key` or `domain_key`)."""
    return HOST_PREFIX + key.encode()


def host_states(store: StateStore) -> dict[str, HostState]:
    """Every host state in `store`, by `group_key` (or `domain_key`)."""
    return {
        key[len(HOST_PREFIX) :].decode(): decode_host_state(value)
        for key, value in store.items(META_FAMILY)
        if key.startswith(HOST_PREFIX)
    }


def paused_groups(store: StateStore) -> dict[str, int]:
    """Queue group key → the end of its last pause, for every group ever paused."""
    return {key: s.paused_until for key, s in host_states(store).items() if s.paused_until}


def hold_paused(
    paused: dict[str, int],
    step_pauses: Mapping[str, list[Pause]],
    changes: list[FrontierChange],
) -> tuple[list[FrontierChange], int]:
    """`changes` with every entry emitted inside its queue group's pause held until the
    pause ends (`state.host_pauses.hold_entries`), and how many were held. `paused` (group key →
    the end of its latest pause, from earlier steps: begun before anything this step
    emits when `fetched_at` never decreases along the input) takes the step's pauses
    after. Nothing is copied while no group was ever paused."""
    if not paused and not step_pauses:
        return changes, 0

    def pauses_of(key: str) -> list[Pause]:
        pauses = step_pauses.get(key, [])
        return [(-1, paused[key]), *pauses] if key in paused else pauses

    out, held = hold_entries(changes, pauses_of)
    for key, pauses in step_pauses.items():
        paused[key] = max(paused.get(key, 0), *(until for _, until in pauses))
    return changes if out is None else out, held
