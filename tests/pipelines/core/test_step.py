"""The step core's rule 4 (the latest change per `change_key`) on its one-pass path, and
rule 2's queued form (`queue_messages`) against `keyed_messages`.

A strategy that never emits a reply request (`Strategy.requests_replies` False) has every
change keyed by its URL, so `apply_pending` keeps the latest per URL in one pass; one that
may (LAFC, LAFC+) goes change by change through `change_key`. Both must give what
`keep_latest` gives, and every strategy must declare truthfully.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest

from frontierflow.connectors.base import Position
from frontierflow.pipelines.core.step import (
    FetchKind,
    LatestChanges,
    apply_pending,
    fetch_kind,
    is_repeat_fetch,
    keep_latest,
    keyed_messages,
    queue_messages,
)
from frontierflow.pipelines.core.strategy import (
    Changes,
    CrawlClock,
    Inlink,
    Link,
    Message,
    Queued,
    Strategy,
    as_messages,
)
from frontierflow.pipelines.embedded.engine import Engine
from frontierflow.pipelines.strategies import STRATEGY_NAMES, build_strategy
from frontierflow.schemas.records import (
    REPLY_ECHO,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    Removal,
)
from frontierflow.state.relevance import Topic
from frontierflow.state.storage.memory import InMemoryStore


def _entry(url: str, via: str | None, priority: float, reply: bool = False) -> FrontierEntry:
    echo = {REPLY_ECHO: "1"} if reply else {"k": str(priority)}
    return FrontierEntry(url, "a.org", priority, "s", "c", 0, via, 1, echo)


class _Emits(Strategy[int]):
    """Emits, for the keys of a batch in order, the changes it is given."""

    name = family = "emits"

    def __init__(self, changes: list[Changes], replies: bool) -> None:
        self.changes = changes
        self.requests_replies = replies  # type: ignore[misc]  # per instance, for the test

    def apply(self, key: str, state: int | None, message: Message, clock: CrawlClock) -> Any:
        raise NotImplementedError

    def apply_keys(
        self,
        batches: Mapping[str, Sequence[Queued]],
        states: dict[str, int | None],
    ) -> list[Changes]:
        return list(self.changes)

    def encode_state(self, state: int) -> bytes:
        return bytes([state])

    def decode_state(self, data: bytes) -> int:
        return data[0]


def _folded(changes: list[Changes]) -> LatestChanges:
    latest: LatestChanges = {}
    for change in changes:
        keep_latest(latest, change)
    return latest


A, B = "https://a.org/a", "https://a.org/b"


@pytest.mark.parametrize(
    ("changes", "replies", "keys"),
    [
        # one change per key, the later of a URL wins
        ([_entry(A, None, 1), Removal(B), _entry(A, B, 2)], False, [A, B]),
        # several changes from one key (a tuple): change by change
        ([(_entry(A, None, 1), Removal(A)), _entry(B, A, 3)], False, [A, B]),
        # a reply request is one parent's: kept beside the URL's own entry
        ([_entry(A, None, 1), _entry(A, B, 2, reply=True)], True, [A, (A, B)]),
    ],
)
def test_the_latest_change_per_key(changes: list[Changes], replies: bool, keys: list) -> None:
    latest: LatestChanges = {}
    apply_pending(_Emits(changes, replies), {}, {}, latest)
    assert latest == _folded(changes)
    assert list(latest) == keys


def test_an_undeclared_reply_request_would_be_merged_with_its_url() -> None:
    """Why the declaration matters: the one-pass path keys by URL alone."""
    changes: list[Changes] = [_entry(A, None, 1), _entry(A, B, 2, reply=True)]
    latest: LatestChanges = {}
    apply_pending(_Emits(changes, False), {}, {}, latest)
    assert list(latest) == [A]


class _Recorder:
    def __init__(self) -> None:
        self.changes: list[FrontierChange] = []

    def write(self, changes: Sequence[FrontierChange], dead: Any) -> None:
        self.changes += changes

    def flush(self) -> bytes:
        return b""

    def rewind(self, position: bytes | None) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_each_strategy_declares_whether_it_requests_replies(
    name: str, fetch_events: Callable[..., list[dict[str, Any]]]
) -> None:
    """Over a log with seeds, a strategy that says it requests no replies emits none, and
    LAFC, which says it does, emits them (so the check can fail)."""
    strategy = build_strategy(name, budget=50, topic=Topic.parse("page"), sections=("UK",))
    records = fetch_events(
        120,
        seed=3,
        pages=60,
        url="https://h{host}.example.org/page/{page}",
        hosts=5,
        max_outlinks=8,
    )
    sink = _Recorder()
    engine = Engine(strategy, InMemoryStore(Engine.families_for(strategy)), sink)
    engine.seed([f"https://h{p % 5}.example.org/page/{p}" for p in range(5)], crawl_id="c")
    events = [FetchEvent.from_avro(r) for r in records]
    for start in range(0, len(events), 20):
        engine.run_step(
            [(Position(None, start + i), e, b"") for i, e in enumerate(events[start : start + 20])]
        )
    replies = [
        c
        for c in sink.changes
        if isinstance(c, FrontierEntry) and c.via is not None and REPLY_ECHO in c.echo
    ]
    assert sink.changes
    if strategy.requests_replies:
        assert name in ("lafc", "lafc-plus") and replies
    else:
        assert replies == []


@pytest.mark.parametrize("name", STRATEGY_NAMES)
@pytest.mark.parametrize("repeat", [False, True])
def test_queued_messages_are_the_keyed_messages_per_key(
    name: str, repeat: bool, fetch_events: Callable[..., list[dict[str, Any]]]
) -> None:
    """Rule 2's queued form: each key's queue, with an `Inlink` read as the Link to that
    key, is the key's share of `keyed_messages` in order, and one Inlink object is shared by
    every child of a page (so nothing is built per link)."""
    strategy = build_strategy(name, budget=50, topic=Topic.parse("page"), sections=("UK",))
    records = fetch_events(
        12,
        seed=5,
        pages=20,
        url="https://h{host}.example.org/page/{page}",
        hosts=3,
        max_outlinks=9,
        extra_outlinks=("https://h0.example.org/page/0",),  # a page may link to itself
    )
    for number, record in enumerate(records):
        event = FetchEvent.from_avro(record)
        clock = CrawlClock(number + 1, event.fetched_at)
        pending: defaultdict[str, list[Queued]] = defaultdict(list)
        routed = queue_messages(strategy, event, repeat, clock, pending)
        expected: dict[str, list[tuple[CrawlClock, Message]]] = {}
        for key, message in keyed_messages(strategy, event, repeat):
            expected.setdefault(key, []).append((clock, message))
        assert {key: list(as_messages(key, queue)) for key, queue in pending.items()} == expected
        assert (routed is None) == repeat
        shared = {id(m) for queue in pending.values() for _, m in queue if type(m) is Inlink}
        links = [m for _, m in keyed_messages(strategy, event, repeat) if type(m) is Link]
        assert len(shared) == (1 if links else 0)
        if routed is not None:
            assert len(links) == (len(routed.children) if routed.inlink is not None else 0)


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_a_repeats_reinforce_is_the_routed_one(
    name: str, fetch_events: Callable[..., list[dict[str, Any]]]
) -> None:
    """What a repeat sends (`Strategy.repeat_reinforce`, which a strategy may compute
    without routing the page) is the Reinforce of `route`, for every strategy."""
    strategy = build_strategy(name, budget=50, topic=Topic.parse("page"), sections=("UK",))
    records = fetch_events(
        12, seed=7, pages=20, url="https://h{host}.example.org/page/{page}", hosts=3, max_outlinks=9
    )
    for record in records:
        event = FetchEvent.from_avro(record)
        assert strategy.repeat_reinforce(event) == strategy.route(event).reinforce


@pytest.mark.parametrize(
    ("last_cycle", "cycle", "due", "answered", "kind"),
    [
        (None, 0, None, None, FetchKind.FIRST),  # never fetched
        (0, 1, None, None, FetchKind.FIRST),  # a new cycle
        (0, 0, None, None, FetchKind.REPEAT),
        (1, 0, None, None, FetchKind.REPEAT),  # an older cycle's fetch
        (0, 0, 5_000, None, FetchKind.REVISIT),  # answers a revisit entry
        (0, 0, 5_000, 4_000, FetchKind.REVISIT),  # a later revisit than the last answered
        (0, 0, 5_000, 5_000, FetchKind.REPEAT),  # that revisit again
        (1, 0, 5_000, None, FetchKind.REPEAT),  # a revisit of an older cycle
        (None, 0, 5_000, None, FetchKind.FIRST),  # the page is unknown: a first fetch
    ],
)
def test_the_repeat_rule_with_revisits(
    last_cycle: int | None, cycle: int, due: int | None, answered: int | None, kind: FetchKind
) -> None:
    assert fetch_kind(last_cycle, cycle, due, answered) is kind
    assert bool(kind) is is_repeat_fetch(last_cycle, cycle)  # a revisit counts no page
