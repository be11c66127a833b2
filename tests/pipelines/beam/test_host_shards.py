"""The unbounded form's pause step keeps, per host shard, only the queue groups whose state
can still begin or hold a pause (`beam.hosts.fold_window`, `can_forget`), and the per-URL
update keeps the pauses begun so far that can still hold an entry (`keep_pauses`). Folded
window by window with groups and pauses forgotten, the answers must give every entry the
same pause as the one fold of `state.host_pauses.group_pauses` over the whole input, the
rule the embedded engine and the bounded form apply."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from frontierflow.pipelines.beam.hosts import can_forget, fold_window, keep_pauses
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.host_pauses import group_pauses, pause_as_of
from frontierflow.state.hosts import HostPolicy, HostState, group_key

POLICY = HostPolicy(backoff_base_ms=50, backoff_max_ms=400, jitter=0.1, failure_run=2)
HOSTS = ("a.test", "b.test", "c.test")
WINDOW_MS = 100


def _answer(at: int, host: str, status: int, retry_after_ms: int | None) -> FetchEvent:
    return FetchEvent(
        url=f"https://{host}/p{at}",
        fetched_at=at,
        status=status,
        fetcher_id="f",
        host=host,
        crawl_id="c",
        cycle=0,
        retry_after_ms=retry_after_ms if status in (429, 503) else None,
        will_retry=status in (429, 503),
    )


answers = st.lists(
    st.tuples(
        st.integers(0, 40),  # gap to the answer before, ms
        st.sampled_from(HOSTS),
        st.sampled_from([200, 200, 200, 404, 429, 500, 503, 599]),
        st.one_of(st.none(), st.integers(0, 300)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(answers)
def test_windows_with_forgotten_groups_hold_as_one_fold(draws: list) -> None:
    at, events = 1_000, []
    for gap, host, status, retry in draws:
        at += gap
        events.append(_answer(at, host, status, retry))
    reference = group_pauses(events, POLICY)
    groups: dict = {}
    live: dict = {}
    for start in range(1_000, at + 1, WINDOW_MS):
        end = start + WINDOW_MS  # the window [start, end), due = end
        window = [e for e in events if start <= e.fetched_at < end]
        begun, groups = fold_window(groups, window, end, POLICY)
        live = keep_pauses(live, begun, -1)
        for host in HOSTS:
            key = group_key("c", host)
            seen = [p for p in reference.get(key, []) if p[0] < end]
            assert begun.get(key, []) == [p for p in seen if p[0] >= start]
            for t in range(start, end):  # an entry emitted at t in this window
                assert pause_as_of(live.get(key, ()), t) == pause_as_of(seen, t)
        live = keep_pauses(live, {}, end)
        for _, pauses in groups.values():
            assert all(p[1] > end for p in pauses)
        assert all(p[1] > end for pauses in live.values() for p in pauses)


def test_a_group_is_forgotten_only_when_nothing_of_it_can_pause_later() -> None:
    assert can_forget(HostState(pages=7, last_fetch_at=990, delay_ms=500), 1_000)
    assert not can_forget(HostState(level=1), 1_000)  # the next back-off is longer
    assert not can_forget(HostState(failures=1), 1_000)  # one failure more pauses
    assert not can_forget(HostState(paused_until=1_001), 1_000)
    assert can_forget(HostState(paused_until=1_000), 1_000)


def test_a_window_of_successes_keeps_no_group() -> None:
    ok = [_answer(1_000 + i, h, 200, None) for i, h in enumerate(HOSTS)]
    begun, groups = fold_window({}, ok, 1_100, POLICY)
    assert begun == {} and groups == {}
    # a 429 with Retry-After 300 ms at 1,150 pauses a.test until 1,450: kept past 1,200
    begun, groups = fold_window(groups, [_answer(1_150, "a.test", 429, 300)], 1_200, POLICY)
    assert begun == {group_key("c", "a.test"): [(1_150, 1_450)]}
    assert list(groups) == [group_key("c", "a.test")]
    # a 200 at 1,460 resets the level; the pause ended at 1,450: forgotten after 1,500
    begun, groups = fold_window(groups, [_answer(1_460, "a.test", 200, None)], 1_500, POLICY)
    assert begun == {} and groups == {}


def test_a_backed_off_group_is_kept_for_its_next_back_off() -> None:
    """A 429 without Retry-After at 1,000 backs a.test off at level 1 (50 ms, ±10 %
    jitter): its pause ends before the window's due, 1,100, but its level stays. The next
    429, at 1,150, backs off at level 2 (100 ms ±10 %): an entry emitted at 1,215 is held,
    which a forgotten level 1 (55 ms at most) would not do."""
    _, groups = fold_window({}, [_answer(1_000, "a.test", 429, None)], 1_100, POLICY)
    assert list(groups) == [group_key("c", "a.test")]
    begun, _ = fold_window(groups, [_answer(1_150, "a.test", 429, None)], 1_300, POLICY)
    ((start, end),) = begun[group_key("c", "a.test")]
    assert start == 1_150 and 1_240 <= end <= 1_260
    assert pause_as_of(begun[group_key("c", "a.test")], 1_215) == end


def test_the_update_keeps_a_pause_while_it_can_hold_an_entry() -> None:
    """a.test paused 1,150–1,450 (begun in the window to 1,200), b.test 1,180–1,190: after
    the window through 1,200 only a.test's pause can hold a later entry; after 1,450, none."""
    a, b = group_key("c", "a.test"), group_key("c", "b.test")
    live = keep_pauses({}, {a: [(1_150, 1_450)], b: [(1_180, 1_190)]}, -1)
    assert live == {a: [(1_150, 1_450)], b: [(1_180, 1_190)]}
    assert keep_pauses(live, {a: [(1_150, 1_450)]}, -1) == live  # a pause sent twice: once
    assert keep_pauses(live, {}, 1_200) == {a: [(1_150, 1_450)]}
    assert keep_pauses(live, {}, 1_450) == {}
