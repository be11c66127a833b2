"""The step core: the per-event rules every engine applies, written once.

A FetchEvent goes through four rules, here and nowhere else (after, for a log of another
crawler or a WARC, its echo is filled from state when it carries none: `echo_fill_key`,
`with_echo_from_state`):

1. **count**: a fetch of a page not yet fetched in its cycle is a *first fetch* and counts
   as one more page of its crawl (IECA's clock); any other fetch is a *repeat*
   (`is_repeat_fetch`) and does not count (`crawl_clock`), unless it answers a scheduled
   revisit (`fetch_kind`): then it is routed as a first fetch is, and not counted;
2. **route**: a first fetch becomes the keyed messages of `Strategy.route`, in the order
   of `Routed.messages`; a repeat becomes at most the parent's `Reinforce` with
   `fresh=False`, and only for a strategy that `learns_from_repeats` (`keyed_messages`,
   which asks `Strategy.repeat_reinforce`; `queue_messages` queues them per key, a page's
   Links as one shared `Inlink`);
3. **apply**: a key's messages go through `Strategy.apply_batch` (by default `apply`
   message by message) in input order, one state read and one state written per batch
   (`apply_messages`; `apply_pending` for many keys, through `Strategy.apply_keys`);
4. **keep the latest change** per `change_key` (`keep_latest`).

The embedded engine calls them per event over its step's states; the bounded Beam
pipeline counts in one ordered pass, routes per event and applies per URL; the streaming
Beam form counts per URL and window. All of them are pure: no I/O, no wall clock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from enum import IntEnum
from operator import attrgetter
from typing import Any, TypeVar, cast

from frontierflow.pipelines.core.strategy import (
    Changes,
    CrawlClock,
    EchoFill,
    Message,
    Queued,
    Routed,
    Strategy,
    change_key,
)
from frontierflow.schemas.records import FetchEvent, FrontierChange
from frontierflow.state.urls import canonical_url

S = TypeVar("S")

LatestChanges = dict[Any, FrontierChange]
"""change key → the latest change; dict order is the order of each key's first change."""


def echo_fill_key(strategy: Strategy[Any], event: FetchEvent) -> str | None:
    """The key whose state fills `event`'s echo, or None: the event carries an echo (the
    fast path: it is used as it came), or the strategy reads none, or it names no parent.

    A log from a WARC or another crawler carries no echo, yet IECA routes the page's
    distance from it and LAFC knows from it that the page answers its parent's choice;
    without it every page would count as a starting page. Engines read the key's state as
    it stands before the event's own messages are applied and call `with_echo_from_state`.
    """
    if event.echo:
        return None
    fill = strategy.echo_fill
    if fill is EchoFill.PAGE:
        return event.url
    if fill is EchoFill.PARENT:
        return event.via
    return None


def with_echo_from_state(strategy: Strategy[S], event: FetchEvent, state: S | None) -> FetchEvent:
    """`event` with the echo its `echo_fill_key`'s state at fetch time says it carried
    (unchanged when there is no state or the state says nothing)."""
    if state is None:
        return event
    echo = strategy.echo_from_state(event, state)
    return replace(event, echo=echo) if echo else event


def is_page_answer(event: FetchEvent) -> bool:
    """Whether `event` answers for its page. A deferred answer (`will_retry`: a 429, a 503,
    no answer, which the fetcher asks again after its host's pause) answers for the host
    only: no engine counts or routes it, the page stays in the frontier, and an engine that
    keeps host state applies it there (`state.hosts.answer_updates`)."""
    return not event.will_retry


def is_repeat_fetch(last_cycle: int | None, cycle: int) -> bool:
    """A fetch of a page already fetched in this cycle (or a later one) is a repeat: applying
    it again would count the page twice and feed its links twice, so it is skipped. The
    last cycle is kept per URL, whatever the crawl."""
    return last_cycle is not None and last_cycle >= cycle


class FetchKind(IntEnum):
    """What a page answer is to the step core (`fetch_kind`). As a flag it is the `repeat`
    of `crawl_clock`: only a first fetch counts."""

    FIRST = 0
    """Counted and routed."""
    REPEAT = 1
    """Neither (a strategy that `learns_from_repeats` still hears its parent's Reinforce)."""
    REVISIT = 2
    """Routed, not counted: a scheduled revisit of a page fetched in its cycle, answered for
    the first time. The strategy hears the page again (its links as they are now); the
    crawl's count of distinct pages does not move."""


def fetch_kind(
    last_cycle: int | None, cycle: int, revisit_due: int | None, answered_ms: int | None
) -> FetchKind:
    """The repeat rule with revisits: a fetch that `is_repeat_fetch` calls a repeat is a
    revisit when it answers a revisit entry (`revisit_due`, the entry's due time from its
    echo: `schemas.records.REVISIT_ECHO`) of the very cycle it was fetched in, later than
    the last revisit of the page answered (`answered_ms`); else a repeat. Engines that
    schedule no revisits pass `revisit_due` None."""
    if not is_repeat_fetch(last_cycle, cycle):
        return FetchKind.FIRST
    if revisit_due is not None and last_cycle == cycle and revisit_due > (answered_ms or 0):
        return FetchKind.REVISIT
    return FetchKind.REPEAT


def crawl_clock(pages_before: int, repeat: bool, fetched_at: int) -> CrawlClock:
    """The clock an event's messages see: a first fetch counts itself (Algorithm 1 of
    Golshani & ZarehBidoki 2012 increments `size` before crawling); a repeat does not count
    again."""
    return CrawlClock(pages_before if repeat else pages_before + 1, fetched_at)


def seed_message(
    strategy: Strategy[Any], url: str, crawl_id: str, cycle: int, pages_before: int, at_ms: int
) -> tuple[str, Message, CrawlClock]:
    """A starting page's message, the key it goes to (the strategy's `seed_key`) and the
    clock it sees: the crawl's pages so far (a seed is no fetch and does not count itself),
    at `at_ms`. Every path seeds through this one rule: the engine's step, the Beam forms,
    the URL Frontier service in front of a live job. The seed is put in its canonical form
    (`canonical_url`), as an event's URLs are (`validate_event`)."""
    url = canonical_url(url)
    message = strategy.seed(url, crawl_id, cycle)
    return strategy.seed_key(url, crawl_id), message, CrawlClock(pages_before, at_ms)


def keyed_messages(
    strategy: Strategy[Any], event: FetchEvent, repeat: bool = False
) -> tuple[tuple[str, Message], ...]:
    """(key, message) pairs `event` sends, in application order (rule 2 above)."""
    if not repeat:
        return strategy.route(event).messages()
    if event.via is None or not strategy.learns_from_repeats:
        return ()
    reinforce = strategy.repeat_reinforce(event)
    if reinforce is None:
        return ()
    return ((reinforce.parent, reinforce._replace(fresh=False)),)


def queue_messages(
    strategy: Strategy[Any],
    event: FetchEvent,
    repeat: bool,
    clock: CrawlClock,
    pending: defaultdict[str, list[Queued]],
) -> Routed | None:
    """`keyed_messages(strategy, event, repeat)` queued at `clock` in `pending` (key → its
    queue), in the same order; returns a first fetch's `Routed` (None for a repeat).

    A first fetch's Links go in as one shared (clock, `Inlink`) pair appended to each
    child's queue (`Routed.children`): no Link, pair or tuple is built per link. A
    strategy's `apply_keys` reads the Inlink as the Link to its key (`as_messages`).
    """
    if repeat:
        for key, message in keyed_messages(strategy, event, repeat):
            pending[key].append((clock, message))
        return None
    routed = strategy.route(event)
    for key, message in routed.head():
        pending[key].append((clock, message))
    if routed.inlink is not None:
        queued: Queued = (clock, routed.inlink)
        for queue in map(pending.__getitem__, routed.children):
            queue.append(queued)
    return routed


def keep_latest(latest: LatestChanges, changes: Changes | None) -> None:
    """Fold one `apply` result into `latest`: a later change replaces an earlier one of the
    same change key (a compacted topic keeps one record per key, so where it stands among
    other keys' records does not matter)."""
    if changes is None:
        return
    if isinstance(changes, tuple):
        for change in changes:
            latest[change_key(change)] = change
        return
    latest[change_key(changes)] = changes


def apply_pending(
    strategy: Strategy[S],
    pending: Mapping[str, Sequence[Queued]],
    states: dict[str, S | None],
    latest: LatestChanges,
) -> None:
    """Rules 3 and 4 for many keys at once: each key of `pending` has its (clock, message)s
    (an `Inlink` standing for the Link to the key: `queue_messages`) applied in order to
    its state in `states` (`Strategy.apply_keys`, by default `apply_batch` key by key), and
    the changes are folded into `latest`. Each key's state depends on its own messages
    only, so the keys may go in any order."""
    out = strategy.apply_keys(pending, states)
    if not strategy.requests_replies and not any(map(_IS_TUPLE, out)):
        # one change per changed key, none a reply request: `change_key` is the URL
        single = cast("list[FrontierChange]", out)  # no tuple among them
        latest.update(zip(map(_URL, single), single, strict=True))
        return
    for changes in out:
        if isinstance(changes, tuple):
            keep_latest(latest, changes)
        else:  # `keep_latest` of one change, inline: there is one per changed key
            latest[change_key(changes)] = changes


_IS_TUPLE = tuple.__instancecheck__
_URL = attrgetter("url")


def apply_messages(
    strategy: Strategy[S],
    key: str,
    state: S | None,
    messages: Iterable[Queued],
    latest: LatestChanges,
) -> S | None:
    """`key`'s state after its (clock, message)s, in order; changes folded into `latest`
    (`apply_pending` for one key)."""
    states: dict[str, S | None] = {key: state}
    apply_pending(strategy, {key: tuple(messages)}, states, latest)
    return states[key]
