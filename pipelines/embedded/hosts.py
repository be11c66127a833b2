"""The embedded engine's side of the frontier's host rule: where host states live in the
store, and frontier entries of paused hosts held until their pause ends.

The rule itself is `state.hosts` (one function for the job and the fetchers); the step
applies it to each event (`Step.observe_host`) and the engine, before it writes a step's
changes, gives every entry of a paused queue group that group's pause end as
`not_before` (at the step's event time, so a replay holds the same entries).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from frontierflow.schemas.records import FrontierChange, FrontierEntry
from frontierflow.state.hosts import HostState, decode_host_state, group_key
from frontierflow.state.store import META_FAMILY, StateStore

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
    step_hosts: Mapping[str, HostState | None],
    now_ms: int,
    changes: list[FrontierChange],
) -> tuple[list[FrontierChange], int]:
    """`changes` with every entry of a queue group paused at `now_ms` held until the pause
    ends (`not_before`), and how many were held; `paused` (group key → pause end) takes
    the step's host states first. Nothing is copied while no group was ever paused."""
    for key, state in step_hosts.items():
        if state is not None and state.paused_until:
            paused[key] = state.paused_until
    if not paused:
        return changes, 0
    held = 0
    out: list[FrontierChange] = []
    for change in changes:
        if isinstance(change, FrontierEntry):
            until = paused.get(group_key(change.crawl_id, change.host), 0)
            if until > now_ms and (change.not_before or 0) < until:
                change = replace(change, not_before=until)
                held += 1
        out.append(change)
    return out, held
