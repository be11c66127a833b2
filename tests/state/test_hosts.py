"""The frontier's host rule (state/hosts.py): back-off, Retry-After, failure runs, page
counts per cycle, the encoding. Expected values worked out by hand from the rules in the
module docstring."""

from __future__ import annotations

import zlib

import pytest

from frontierflow.schemas.records import FetchEvent, FrontierEntry
from frontierflow.state.host_pauses import group_pauses, held_entry, pause_as_of
from frontierflow.state.hosts import (
    DAY_MS,
    HostPolicy,
    HostReport,
    HostState,
    backoff_ms,
    count_page,
    decode_host_state,
    encode_host_state,
    held_until,
    host_after_fetch,
    jitter_factor,
    parse_retry_after,
    set_by_client,
)
from frontierflow.state.storage.codec import StateCodecError

NO_JITTER = HostPolicy(jitter=0.0)
KEY = "crawl\x00busy.test"


def fold(reports: list[HostReport], policy: HostPolicy = NO_JITTER) -> HostState:
    state: HostState | None = None
    for report in reports:
        state = host_after_fetch(state, report, KEY, policy)
    assert state is not None
    return state


def test_retry_after_pauses_until_the_announced_time() -> None:
    s = fold([HostReport(1_000, 200), HostReport(2_000, 429, retry_after_ms=15_000)])
    assert s.paused_until == 17_000 and s.reason == "429" and s.level == 1
    assert s.paused(16_999) and not s.paused(17_000)
    assert s.next_allowed() == 17_000
    assert s.pages == 1  # the 429 is no page: it will be asked for again


def test_retry_after_is_capped_at_a_day() -> None:
    s = fold([HostReport(0, 503, retry_after_ms=3 * DAY_MS)])
    assert s.paused_until == DAY_MS


def test_backoff_without_retry_after_doubles_from_60_s_up_to_a_day() -> None:
    # levels 1..12: 60 s · 2^(level-1) = 60, 120, 240, ... 61440 s, then the cap 86400 s
    expected = [60_000 * 2**k for k in range(11)] + [DAY_MS, DAY_MS]
    assert [backoff_ms(level, KEY, 0, NO_JITTER) for level in range(1, 14)] == expected
    s = fold([HostReport(t * 1_000, 429) for t in range(3)])
    # third 429 at t=2 s: level 3, 240 s from then
    assert s.level == 3 and s.paused_until == 2_000 + 240_000


def test_jitter_is_within_ten_percent_and_repeatable() -> None:
    policy = HostPolicy()  # jitter 0.10
    # u = crc32(key, level, time) / 2^31 - 1, so the factor is 1 + 0.1·u
    h = zlib.crc32(f"{KEY}\x00{1}\x00{5000}".encode())
    factor = 1 + 0.1 * (h / 2**31 - 1)
    assert jitter_factor(KEY, 1, 5000, 0.1) == factor
    assert backoff_ms(1, KEY, 5000, policy) == round(60_000 * factor)
    spread = {backoff_ms(1, KEY, t, policy) for t in range(200)}
    assert len(spread) > 50  # draws differ with the time
    assert min(spread) >= 54_000 and max(spread) <= 66_000
    # the cap holds after the jitter too
    assert all(backoff_ms(20, KEY, t, policy) <= DAY_MS for t in range(50))


def test_a_run_of_server_errors_or_transport_failures_backs_off() -> None:
    policy = HostPolicy(jitter=0.0, failure_run=3)
    two = fold([HostReport(0, 500), HostReport(1_000, -1)], policy)
    assert two.failures == 2 and two.paused_until == 0
    three = host_after_fetch(two, HostReport(2_000, -2), KEY, policy)
    assert three.reason == "transport" and three.level == 1
    assert three.paused_until == 2_000 + 60_000
    four = host_after_fetch(three, HostReport(70_000, 502), KEY, policy)
    assert four.reason == "5xx" and four.level == 2 and four.paused_until == 70_000 + 120_000


def test_a_2xx_resets_the_level_and_the_run_but_not_a_running_pause() -> None:
    s = fold([HostReport(0, 429), HostReport(100, 500), HostReport(200, 200)])
    assert s.level == 0 and s.failures == 0
    assert s.paused_until == 60_000  # announced at t=0; a request already in flight answered


def test_not_found_and_redirects_leave_the_host_alone() -> None:
    s = fold([HostReport(0, 404), HostReport(1, 301), HostReport(2, 403)])
    assert s.paused_until == 0 and s.level == 0 and s.failures == 0 and s.pages == 3


def test_answers_without_a_request_do_not_count() -> None:
    s = fold([HostReport(0, 208), HostReport(1, -7), HostReport(2, -4)])
    assert s == HostState()


def test_pages_count_per_cycle_and_restart_with_a_new_one() -> None:
    s = fold([HostReport(0, 200, cycle=0), HostReport(1, 404, cycle=0)])
    assert (s.cycle, s.pages) == (0, 2)
    assert s.exhausted(2, 0) and not s.exhausted(3, 0) and not s.exhausted(None, 0)
    s = host_after_fetch(s, HostReport(2, 200, cycle=1), KEY, NO_JITTER)
    assert (s.cycle, s.pages) == (1, 1)
    assert not s.exhausted(2, 1)
    s = host_after_fetch(s, HostReport(3, 200, cycle=0), KEY, NO_JITTER)  # a late old one
    assert (s.cycle, s.pages) == (1, 1)


def test_crawl_delay_becomes_the_delay_and_is_capped() -> None:
    s = fold([HostReport(10_000, 200, crawl_delay_ms=2_000)])
    assert s.delay_ms == 2_000 and s.next_allowed() == 12_000
    s = fold([HostReport(0, 200, crawl_delay_ms=3_600_000)])
    assert s.delay_ms == 60_000


def test_domain_counts_pages_only() -> None:
    d = count_page(None, HostReport(0, 429))
    assert d.pages == 0
    d = count_page(d, HostReport(1, 200))
    d = count_page(d, HostReport(2, 500))
    assert (d.pages, d.paused_until) == (2, 0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("15", 15_000),
        (" 0 ", 0),
        # 1994-11-06 08:49:37 UTC is 784111777 s; now 784111767 s: ten seconds ahead
        ("Sun, 06 Nov 1994 08:49:37 GMT", 10_000),
        ("Sun, 06 Nov 1994 08:49:00 GMT", 0),  # in the past: at once
        ("soon", None),
        ("-5", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_retry_after(value: str | None, expected: int | None) -> None:
    assert parse_retry_after(value, 784_111_767_000) == expected


def test_policy_is_validated() -> None:
    with pytest.raises(ValueError, match="jitter"):
        HostPolicy(jitter=1.5)
    with pytest.raises(ValueError, match="backoff_base_ms"):
        HostPolicy(backoff_base_ms=0)
    with pytest.raises(ValueError, match="host_page_limit"):
        HostPolicy(host_page_limit=0)


def test_encoding_round_trips_and_refuses_garbage() -> None:
    s = HostState(
        paused_until=1_700_000_015_000,
        delay_ms=2_000,
        level=3,
        failures=1,
        reason="503",
        cycle=2,
        pages=41,
        last_fetch_at=1_700_000_000_000,
        pauses=7,
        page_limit=50,
    )
    assert decode_host_state(encode_host_state(s)) == s
    assert decode_host_state(encode_host_state(HostState())) == HostState()
    raw = encode_host_state(s)
    with pytest.raises(StateCodecError):
        decode_host_state(raw[:10])
    with pytest.raises(StateCodecError):
        decode_host_state(b"\x09" + raw[1:])
    with pytest.raises(StateCodecError):
        decode_host_state(raw + b"x")


def test_a_version_1_state_reads_with_no_page_limit_of_its_own() -> None:
    # version 1: the same fields without page_limit, written by hand
    import struct

    raw = struct.pack(">BqqIIIiIIB", 1, 15_000, 10_000, 2_000, 1, 0, 3, 9, 1, 3) + b"429"
    assert decode_host_state(raw) == HostState(
        paused_until=15_000,
        delay_ms=2_000,
        level=1,
        reason="429",
        cycle=3,
        pages=9,
        last_fetch_at=10_000,
        pauses=1,
    )


def test_a_clients_word_sets_block_delay_and_limit() -> None:
    # a host paused by a 429 until 17 s, then blocked by a client until 5 s: the client's
    # block replaces the pause (the client knows better), and 0 lifts it
    s = fold([HostReport(2_000, 429, retry_after_ms=15_000)])
    blocked = set_by_client(s, blocked_until_ms=5_000)
    assert (blocked.paused_until, blocked.reason, blocked.level) == (5_000, "blocked", 1)
    assert set_by_client(blocked, blocked_until_ms=0).paused_until == 0
    assert set_by_client(None, delay_ms=20_000).delay_ms == 20_000
    assert set_by_client(s) == s
    with pytest.raises(ValueError):
        set_by_client(None, page_limit=-1)


def test_a_groups_own_page_limit_stands_before_the_policys_and_survives_answers() -> None:
    policy = HostPolicy(jitter=0.0, host_page_limit=10)
    states: dict[str, HostState] = {}
    key = "c\x00a.test"
    states[key] = set_by_client(None, page_limit=2)
    for t in (1, 2):
        states[key] = host_after_fetch(states[key], HostReport(t, 200), key, policy)
    assert states[key].page_limit == 2 and states[key].pages == 2
    assert held_until(states.get, "c", "a.test", 0, 3, policy) == 0  # spent at 2, not 10
    states[key] = set_by_client(states[key], page_limit=0)  # back to the policy's 10
    assert held_until(states.get, "c", "a.test", 0, 3, policy) is None
    assert held_until(states.get, "c", "a.test", 1, 3, policy) is None  # a new cycle


def test_pauses_of_a_group_and_the_one_under_way_at_a_time() -> None:
    """busy.test: 429 with Retry-After 15 s at 2 s (pause to 17 s); 200 at 20 s; 503 without
    Retry-After at 30 s (back-off level 1: 60 s, no jitter: to 90 s); 429 with Retry-After
    5 s at 31 s ends before 90 s (no pause moves). good.test answers 200 only."""

    def event(host: str, at: int, status: int, retry: int | None = None) -> FetchEvent:
        return FetchEvent(
            url=f"http://{host}/", fetched_at=at, status=status, fetcher_id="f", host=host,
            retry_after_ms=retry,
        )  # fmt: skip

    events = [
        event("busy.test", 2_000, 429, 15_000),
        event("good.test", 3_000, 200),
        event("busy.test", 20_000, 200),
        event("busy.test", 30_000, 503),
        event("busy.test", 31_000, 429, 5_000),
    ]
    pauses = group_pauses(events, NO_JITTER)
    busy = "default\x00busy.test"
    assert pauses == {busy: [(2_000, 17_000), (30_000, 90_000)]}
    expected = {1_999: 0, 2_000: 17_000, 16_999: 17_000, 17_000: 0, 29_999: 0, 30_000: 90_000}
    for at, until in expected.items():
        assert pause_as_of(pauses[busy], at) == until, at

    def entry(at: int, not_before: int | None = None) -> FrontierEntry:
        return FrontierEntry(
            "http://busy.test/a", "busy.test", 1.0, "bfs", "default", 0, None, at,
            not_before=not_before,
        )  # fmt: skip

    assert held_entry(entry(1_000), pauses[busy]) is None  # before the pause began
    held = held_entry(entry(5_000), pauses[busy])
    assert held is not None and held.not_before == 17_000 and held.emitted_at == 5_000
    assert held_entry(entry(5_000, not_before=20_000), pauses[busy]) is None  # held longer
    assert held_entry(entry(18_000), pauses[busy]) is None  # after it ended
