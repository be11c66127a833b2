"""The revisit schedule of a live crawl (`state/revisit_schedule.py`), worked out by hand.

A page's yield is the links new to it its revisits showed per ms watched, y. Of a host's
budget b (one per minute here), 1.5% goes to probes and the rest to revisits: a page with
y > 0 gets f = 0.985·b·y² / Σ_host y², due 1/f after its visit; a page without is probed
by its probe weight p = 1 + the links new to it its last visit showed, f = 0.015·b·(p /
Σ_host p)³ (0.015 becomes 1 while no page of the host has a yield), no sooner than it has
gone unchanged, at least an hour (the job's settings)."""

from __future__ import annotations

import struct

import pytest

from frontierflow.schemas.records import FetchEvent
from frontierflow.state.revisit_schedule import (
    HostRevisits,
    PageSchedule,
    RevisitMode,
    RevisitPolicy,
    decode_host_revisits,
    decode_page_schedule,
    encode_host_revisits,
    encode_page_schedule,
    host_due,
    parse_revisit,
    visit_page,
)
from frontierflow.state.revisits import encode_page_revisits
from frontierflow.state.storage.codec import StateCodecError

HOUR = 3_600_000
LEARNED = RevisitPolicy(RevisitMode.LEARNED, every_ms=60_000)


def _answer(url: str, at: int, links: tuple[str, ...], status: int = 200, **kw: int) -> FetchEvent:
    return FetchEvent(url, at, status, "f", "news.test", outlinks=links, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("none", None),
        ("fixed:1h", RevisitPolicy(RevisitMode.FIXED, interval_ms=3_600_000)),
        ("fixed:90s", RevisitPolicy(RevisitMode.FIXED, interval_ms=90_000)),
        ("fixed:500ms", RevisitPolicy(RevisitMode.FIXED, interval_ms=500)),
        ("fixed:2.5", RevisitPolicy(RevisitMode.FIXED, interval_ms=2_500)),
        ("learned", RevisitPolicy(RevisitMode.LEARNED, every_ms=60_000)),
        ("learned:5m", RevisitPolicy(RevisitMode.LEARNED, every_ms=300_000)),
        ("learned:1d", RevisitPolicy(RevisitMode.LEARNED, every_ms=86_400_000)),
    ],
)
def test_the_option_is_read_once(text: str, expected: RevisitPolicy | None) -> None:
    assert parse_revisit(text) == expected


@pytest.mark.parametrize("text", ["fixed", "fixed:0s", "fixed:soon", "learned:0", "always", ""])
def test_bad_options_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_revisit(text)


def test_fixed_the_download_time_plus_the_interval_and_none_after_no_download() -> None:
    fixed = RevisitPolicy(RevisitMode.FIXED, interval_ms=HOUR)
    page, visit = visit_page(None, _answer("http://news.test/", 1_000, ("a",)), None, fixed)
    assert page == PageSchedule() and host_due(None, visit, fixed)[0] == 1_000 + HOUR
    page, visit = visit_page(page, _answer("http://news.test/", 9_000, (), 404), 4_000, fixed)
    assert page.answered_ms == 4_000 and host_due(None, visit, fixed)[0] is None


def test_learned_probes_a_page_then_gives_it_the_hosts_budget() -> None:
    url = "http://news.test/"
    page, visit = visit_page(None, _answer(url, 0, ("a",)), None, LEARNED)
    due, host = host_due(None, visit, LEARNED)
    # no estimate: probe weight 1 + 1 link new to it, alone, and no page of the host has a
    # yield: the whole budget, one a minute, but not before the hour a probe waits
    assert page.probe_weight == 2 and due == HOUR
    page, visit = visit_page(page, _answer(url, HOUR, ("a",)), HOUR, LEARNED)
    due, host = host_due(host, visit, LEARNED)
    # one revisit, no new link: still probed (weight 1), not before it has gone unchanged
    # for as long as it had (an hour, from 0 to its visit)
    assert page.weight == 0 and page.probe_weight == 1 and due == 2 * HOUR
    page, visit = visit_page(page, _answer(url, 2 * HOUR, ("a", "b", "c")), 2 * HOUR, LEARNED)
    # 2 links new to the page over 2 hours watched: y = 1 per hour, weight y^2
    assert page.weight == pytest.approx((1 / HOUR) ** 2, rel=1e-12) and page.probe_weight == 0
    assert page.answered_ms == 2 * HOUR and page.page is not None and page.page.found == 2
    due, host = host_due(host, visit, LEARNED)
    # alone on its host with a yield: the revisits' 98.5% of the budget, 60 s / 0.985
    assert due == 2 * HOUR + 60_914
    assert host == HostRevisits(page.weight, 0, 0.0)


def test_a_hosts_revisits_are_shared_by_the_power_of_the_rates_of_new_links() -> None:
    one, two = "http://news.test/", "http://news.test/world"
    host: HostRevisits | None = None
    pages: dict[str, PageSchedule | None] = {one: None, two: None}
    dues: dict[str, int | None] = {}
    for url, at, links in (
        (one, 0, ("a",)),
        (two, 0, ("x",)),
        (two, HOUR // 2, ("x", "y")),
        (one, HOUR, ("a", "b")),
    ):
        pages[url], visit = visit_page(pages[url], _answer(url, at, links), None, LEARNED)
        dues[url], host = host_due(host, visit, LEARNED)
    # two: 1 new link in 30 min, y = 2/h; one: 1 in an hour, y = 1/h; weights y^2
    w_one, w_two = (1 / HOUR) ** 2, (2 / HOUR) ** 2
    assert dues[two] == HOUR // 2 + 60_914  # when it was estimated, the only page with one
    # one: (1 - 0.015) · (1 per minute) · w_one / (w_one + w_two) = 0.985 / 5 per minute
    assert dues[one] == HOUR + round(60_000 * 5 / 0.985)
    assert host is not None and host.weight == pytest.approx(w_one + w_two, rel=1e-12)
    assert host.probe_weight == 0


def test_probes_share_their_part_of_the_budget_by_the_new_links_last_shown() -> None:
    policy = RevisitPolicy(RevisitMode.LEARNED, every_ms=600_000)
    hub, one, two = "http://news.test/", "http://news.test/world", "http://news.test/uk"
    page, visit = visit_page(None, _answer(hub, 0, ("h",)), None, policy)
    _, host = host_due(None, visit, policy)
    page, visit = visit_page(page, _answer(hub, HOUR, ("h", "i")), None, policy)
    _, host = host_due(host, visit, policy)  # the hub has a yield: probes keep their share
    _, visit = visit_page(None, _answer(one, HOUR, ("a", "b", "c")), None, policy)
    due_one, host = host_due(host, visit, policy)
    _, visit = visit_page(None, _answer(two, HOUR, ("x",)), None, policy)
    due_two, host = host_due(host, visit, policy)
    # probes: 1.5% of one per 10 min; one (weight 4) alone then, two (weight 2) a third
    # of the weight, (1/3)^3 of the probes' share
    assert due_one == HOUR + round(600_000 / 0.015)
    assert due_two == HOUR + round(600_000 * 27 / 0.015)
    assert host == HostRevisits(page.weight, 0, 6.0)


def test_before_any_yield_probes_take_the_budget_and_the_page_that_stands_out_most_of_it() -> None:
    policy = RevisitPolicy(RevisitMode.LEARNED, every_ms=1_800_000)
    home, one, two = "http://news.test/", "http://news.test/world", "http://news.test/uk"
    links = tuple(f"s{i}" for i in range(9))
    dues, host = [], None
    for url, shown in ((one, ("a",)), (two, ("x",)), (home, links)):
        _, visit = visit_page(None, _answer(url, 0, shown), None, policy)
        due, host = host_due(host, visit, policy)
        dues.append(due)
    # no page has a yield: the whole budget, one per 30 min, to probes. one alone (weight
    # 2): an hour, the earliest a probe may be; two: half the weight, 1/8 of the budget,
    # 4 h (in proportion, a half: the hour); home: 10 of 14, (5/7)^3 of it, 30 min ·
    # 343/125 = 82.3 min
    assert dues == [HOUR, 4 * HOUR, round(1_800_000 * 343 / 125)]
    assert host == HostRevisits(0.0, 0, 14.0)


def test_a_story_is_asked_for_no_more() -> None:
    url = "http://news.test/news/1"
    page, visit = visit_page(None, _answer(url, 0, ("a", "b"), published_at=0), None, LEARNED)
    due, host = host_due(None, visit, LEARNED)
    assert due is None and host == HostRevisits()
    assert page.links == () and page.weight == page.probe_weight == 0


def test_a_hosts_crawl_delay_bounds_its_budget() -> None:
    url = "http://news.test/"
    page, host = None, None
    for at, links in ((0, ("a",)), (HOUR, ("b",)), (2 * HOUR, ("c",))):
        page, visit = visit_page(
            page, _answer(url, at, links, crawl_delay_ms=120_000), None, LEARNED
        )
        due, host = host_due(host, visit, LEARNED)
    # one request per 2 min at most, below the 1 a minute: 120 s / 0.985
    assert due == 2 * HOUR + round(120_000 / 0.985)


def test_a_download_timed_before_the_last_visit_counts_at_it() -> None:
    url = "http://news.test/"
    page, _ = visit_page(None, _answer(url, 5_000, ("a",)), None, LEARNED)
    page, _ = visit_page(page, _answer(url, 4_000, ("b",)), None, LEARNED)
    assert page.page is not None and page.page.last_visit_ms == 5_000 and page.page.changes == 1


def test_records_round_trip_and_bad_bytes_raise_one_error() -> None:
    url = "http://news.test/"
    page, _ = visit_page(None, _answer(url, 5_000, ("a",)), None, LEARNED)
    page, _ = visit_page(page, _answer(url, 9_000, ("b",)), 7_000, LEARNED)
    assert page.links and page.page is not None
    for record in (page, PageSchedule(answered_ms=3)):
        assert decode_page_schedule(encode_page_schedule(record)) == record
    host = HostRevisits(0.25, 30_000, 3.0)
    assert decode_host_revisits(encode_host_revisits(host)) == host
    good = encode_page_schedule(page)
    for bad in (good[:10], good[:30], b"\x03" + good[1:], good[:25] + b"\x00" + good[26:]):
        with pytest.raises(StateCodecError):
            decode_page_schedule(bad)
    with pytest.raises(StateCodecError):
        decode_host_revisits(encode_host_revisits(host)[:-1])


def test_records_of_the_first_layout_are_read_without_links_or_probe_weights() -> None:
    url = "http://news.test/"
    page, _ = visit_page(None, _answer(url, 5_000, ("a",)), None, LEARNED)
    assert page.page is not None
    old = struct.pack(">BqdB", 1, 7_000, 0.5, 1) + encode_page_revisits(page.page)
    assert decode_page_schedule(old) == PageSchedule(7_000, page.page, 0.5)
    assert decode_host_revisits(struct.pack(">Bdq", 1, 0.25, 9)) == HostRevisits(0.25, 9)
