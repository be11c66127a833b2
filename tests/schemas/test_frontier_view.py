"""The frontier topic read to its end, worked by hand: the latest entry per key, a URL's
tombstone sparing its reply requests, an answered request's tombstone, dropping a URL with
its requests, and a lazy heap's staleness check; then the view against the topic compacted."""

from __future__ import annotations

import heapq

from hypothesis import given
from hypothesis import strategies as st

from frontierflow.schemas.frontier_view import FrontierView, Key
from frontierflow.schemas.records import (
    REPLY_ECHO,
    FrontierEntry,
    change_key,
    frontier_record_key,
    split_frontier_key,
)

PAGE = "https://a.invalid/page"
OTHER = "https://a.invalid/other"
P1 = "https://a.invalid/p1"
P2 = "https://a.invalid/p2"


def entry(url: str, priority: float, via: str | None = None, reply: bool = False) -> FrontierEntry:
    return FrontierEntry(
        url=url,
        host="a.invalid",
        priority=priority,
        strategy="lafc",
        crawl_id="c",
        cycle=0,
        via=via,
        emitted_at=0,
        echo={REPLY_ECHO: "1"} if reply else {},
    )


def view_of(*entries: FrontierEntry) -> FrontierView[FrontierEntry]:
    view: FrontierView[FrontierEntry] = FrontierView()
    for e in entries:
        view.put(change_key(e), e)
    return view


def test_the_latest_entry_per_key_replaces_the_one_before_in_its_place() -> None:
    first, other, second = entry(PAGE, 1.0), entry(OTHER, 5.0), entry(PAGE, 3.0)
    view = view_of(first, other, second)
    assert len(view) == 2
    assert view.get(PAGE) is second
    assert list(view) == [PAGE, OTHER]  # the key keeps the place of its first entry
    # an entry with a via but no reply echo is a plain entry: it replaces the URL's
    linked = entry(PAGE, 4.0, via=P1)
    view.put(change_key(linked), linked)
    assert (len(view), view.get(PAGE)) == (2, linked)
    assert view.replies == {}


def test_reply_requests_are_kept_per_parent_beside_the_urls_entry() -> None:
    plain, ask1, ask2 = entry(PAGE, 1.0), entry(PAGE, 2.0, P1, True), entry(PAGE, 3.0, P2, True)
    ask1_again = entry(PAGE, 7.0, P1, True)
    view = view_of(plain, ask1, ask2, ask1_again)
    assert list(view.items()) == [(PAGE, plain), ((PAGE, P1), ask1_again), ((PAGE, P2), ask2)]
    assert view.replies == {PAGE: {(PAGE, P1), (PAGE, P2)}}


def test_a_urls_tombstone_spares_its_reply_requests() -> None:
    plain, ask1, ask2 = entry(PAGE, 1.0), entry(PAGE, 2.0, P1, True), entry(PAGE, 3.0, P2, True)
    view = view_of(plain, ask1, ask2, entry(OTHER, 1.0))
    assert view.tombstone(PAGE) is plain
    assert list(view) == [(PAGE, P1), (PAGE, P2), OTHER]
    assert view.replies == {PAGE: {(PAGE, P1), (PAGE, P2)}}
    assert view.tombstone(PAGE) is None  # a second tombstone finds nothing to remove
    assert len(view) == 3


def test_an_answered_reply_requests_tombstone_drops_just_that_key() -> None:
    plain, ask1, ask2 = entry(PAGE, 1.0), entry(PAGE, 2.0, P1, True), entry(PAGE, 3.0, P2, True)
    view = view_of(plain, ask1, ask2)
    assert view.tombstone((PAGE, P1)) is ask1
    assert list(view) == [PAGE, (PAGE, P2)]
    assert view.replies == {PAGE: {(PAGE, P2)}}
    assert view.tombstone((PAGE, P2)) is ask2
    assert list(view) == [PAGE]
    assert view.replies == {}  # no request left for the URL: it leaves the index


def test_dropping_a_url_takes_its_reply_requests_with_it() -> None:
    plain, ask1, ask2 = entry(PAGE, 1.0), entry(PAGE, 2.0, P1, True), entry(PAGE, 3.0, P2, True)
    other = entry(OTHER, 1.0)
    other_ask = entry(OTHER, 1.0, P1, True)
    view = view_of(plain, ask1, other, ask2, other_ask)
    dropped = view.drop_url(PAGE)
    assert dropped[0] is plain
    assert sorted(e.via for e in dropped[1:]) == [P1, P2]
    assert list(view) == [OTHER, (OTHER, P1)]
    assert view.replies == {OTHER: {(OTHER, P1)}}
    assert view.drop_url(PAGE) == []
    # only requests left: they go too
    view.tombstone(OTHER)
    assert view.drop_url(OTHER) == [other_ask]
    assert (len(view), view.replies) == (0, {})


def test_a_lazy_heap_skips_the_items_replaced_or_removed_since_their_push() -> None:
    """Push an item per entry; serving takes the best item whose entry is still current."""
    view: FrontierView[FrontierEntry] = FrontierView()
    heap: list[tuple[float, int, FrontierEntry]] = []
    pushes = [
        entry(PAGE, 9.0),  # replaced below by a worse entry: its item goes stale
        entry(OTHER, 5.0),
        entry(PAGE, 2.0),
        entry(PAGE, 8.0, P1, True),  # removed below by its tombstone
        entry(PAGE, 3.0, P2, True),
    ]
    for seq, e in enumerate(pushes):
        view.put(change_key(e), e)
        heapq.heappush(heap, (-e.priority, seq, e))
    assert not view.is_current(PAGE, pushes[0])
    assert view.is_current(PAGE, pushes[2])
    view.tombstone((PAGE, P1))
    served = []
    while heap:
        e = heapq.heappop(heap)[2]
        if view.take(change_key(e), e):
            served.append((e.url, e.via, e.priority))
    # 9 (replaced) and 8 (tombstoned) are skipped; then 5, 3, 2
    assert served == [(OTHER, None, 5.0), (PAGE, P2, 3.0), (PAGE, None, 2.0)]
    assert (len(view), view.replies) == (0, {})
    assert not view.take(OTHER, pushes[1])  # served once: a second take changes nothing


def test_clear_keeps_the_dicts_a_reader_holds() -> None:
    view = view_of(entry(PAGE, 1.0), entry(PAGE, 2.0, P1, True))
    latest, replies = view.latest, view.replies
    view.clear()
    assert view.latest is latest and view.replies is replies
    assert (latest, replies) == ({}, {})


Record = tuple[str, int, bool, bool]
"""(url, parent index, reply request?, tombstone?) of one record on the topic."""


@given(
    st.lists(
        st.tuples(st.sampled_from([PAGE, OTHER]), st.integers(0, 2), st.booleans(), st.booleans()),
        max_size=40,
    )
)
def test_the_view_holds_what_the_compacted_topic_holds(records: list[Record]) -> None:
    """Kafka keeps the last record per key and a tombstone deletes its key: the view reads
    the same entries, with an index holding exactly each URL's reply requests."""
    view: FrontierView[FrontierEntry] = FrontierView()
    compacted: dict[str, FrontierEntry] = {}
    for i, (url, parent, reply, tomb) in enumerate(records):
        e = entry(url, float(i), via=f"{P1}{parent}" if reply else None, reply=reply)
        wire = frontier_record_key(e)
        if tomb:
            compacted.pop(wire, None)
            view.tombstone(split_frontier_key(wire))
        else:
            compacted[wire] = e
            view.put(change_key(e), e)
    expected: dict[Key, FrontierEntry] = {split_frontier_key(k): e for k, e in compacted.items()}
    assert dict(view.items()) == expected
    index: dict[str, set[tuple[str, str]]] = {}
    for key in expected:
        if isinstance(key, tuple):
            index.setdefault(key[0], set()).add(key)
    assert view.replies == index
