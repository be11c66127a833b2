"""The pauses of a queue group, and the frontier entries they hold: in event time, one
definition for the embedded engine (in steps of any size) and both Beam forms.

An answer that begins or lengthens a pause (`state.hosts.host_after_fetch`) is recorded
as (its time, the pause's end). An entry is held until the end of the pause under way at
its `emitted_at`, by what had been answered by then (`held_entry`); it is never dropped
for a pause: a fetcher takes it when `not_before` has passed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from frontierflow.schemas.records import FetchEvent, FrontierChange, FrontierEntry
from frontierflow.state.hosts import (
    DEFAULT_POLICY,
    HostPolicy,
    HostState,
    HostStates,
    answer_updates,
    group_key,
)

Pause = tuple[int, int]
"""A pause of a queue group: (the time of the answer that began or lengthened it, its end),
both epoch ms."""


def pause_begun(before: HostState | None, after: HostState, at_ms: int) -> Pause | None:
    """The pause an answer at `at_ms` began or lengthened (the group's state before and
    after it), or None when it moved no pause's end."""
    if after.paused_until > (0 if before is None else before.paused_until):
        return (at_ms, after.paused_until)
    return None


def answer_and_pause(
    states: HostStates, event: FetchEvent, policy: HostPolicy = DEFAULT_POLICY
) -> tuple[list[tuple[str, HostState]], Pause | None]:
    """`answer_updates` for one answer, and the pause it began for its queue group (the
    event's host), if any: what every path that holds entries records of an answer."""
    key = group_key(event.crawl_id, event.host)
    before = states(key)
    updates = answer_updates(states, event, policy)
    return updates, pause_begun(before, updates[0][1], event.fetched_at)


def pause_as_of(pauses: Iterable[Pause], at_ms: int) -> int:
    """The end of the group's pause under way at `at_ms` by what had been answered by then
    (the latest end among `pauses` begun at or before `at_ms`), or 0 when none was."""
    until = max((end for begun, end in pauses if begun <= at_ms), default=0)
    return until if until > at_ms else 0


def held_entry(entry: FrontierEntry, pauses: Iterable[Pause]) -> FrontierEntry | None:
    """`entry` held until the end of its group's pause under way when it was emitted
    (`pause_as_of` its `emitted_at`), or None when it is not held."""
    until = pause_as_of(pauses, entry.emitted_at)
    if until == 0 or (entry.not_before or 0) >= until:
        return None
    return replace(entry, not_before=until)


def hold_entries(
    changes: Sequence[FrontierChange], pauses_of: Callable[[str], Sequence[Pause]]
) -> tuple[list[FrontierChange] | None, int]:
    """`changes` with every entry held by its group's pauses (`pauses_of` a `group_key`),
    and how many were held; None instead of a copy when none was."""
    out: list[FrontierChange] | None = None
    for i, change in enumerate(changes):
        if isinstance(change, FrontierEntry):
            pauses = pauses_of(group_key(change.crawl_id, change.host))
            kept = held_entry(change, pauses) if pauses else None
            if kept is not None:
                if out is None:
                    out = list(changes)
                out[i] = kept
    held = 0 if out is None else sum(a is not b for a, b in zip(out, changes, strict=True))
    return out, held


def group_pauses(
    events: Iterable[FetchEvent], policy: HostPolicy = DEFAULT_POLICY
) -> dict[str, list[Pause]]:
    """Every pause the rule gives the queue groups of `events` (in input order), by group
    key: `answer_and_pause` folded over them, as the job folds them."""
    states: dict[str, HostState] = {}
    pauses: dict[str, list[Pause]] = {}
    for event in events:
        updates, pause = answer_and_pause(states.get, event, policy)
        states.update(updates)
        if pause is not None:
            pauses.setdefault(group_key(event.crawl_id, event.host), []).append(pause)
    return pauses
