"""The revisit schedule of a live crawl (`state/revisit_schedule.py`), worked out by hand.

Cho & Garcia-Molina 2003 (TOIT): a page visited n times at a mean interval I, X of the
visits seeing a change, has the rate λ = −ln((n − X + 0.5) / (n + 0.5)) / I. A page with a
rate gets the share f = b·√λ / Σ_host √λ of its host's budget b, due 1/f after its visit
(the square-root rule); a page without one is probed after as long as it has gone
unchanged, at least an hour (the record's defaults)."""

from __future__ import annotations

import math

import pytest

from frontierflow.schemas.records import FetchEvent
from frontierflow.state.revisit_budget import square_root_frequencies
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
    assert due == HOUR  # no estimate: probed after at least an hour
    page, visit = visit_page(page, _answer(url, HOUR, ("a",)), HOUR, LEARNED)
    due, host = host_due(host, visit, LEARNED)
    assert due == 2 * HOUR  # unchanged for an hour: probed an hour later
    page, visit = visit_page(page, _answer(url, 2 * HOUR, ("a", "b")), 2 * HOUR, LEARNED)
    # n = 2 revisits, X = 1 saw a change, I = 2 h / 2: λ = −ln(1.5 / 2.5) / 1 h
    rate = -math.log(1.5 / 2.5) / HOUR
    assert page.weight == pytest.approx(math.sqrt(rate), rel=1e-12)
    assert page.answered_ms == 2 * HOUR and page.page is not None and page.page.changes == 1
    due, host = host_due(host, visit, LEARNED)
    assert due == 2 * HOUR + 60_000  # alone on its host with a rate: the whole budget
    assert host == HostRevisits(page.weight, 0)


def test_a_hosts_budget_is_shared_by_the_square_root_of_the_rates() -> None:
    one, two = "http://news.test/", "http://news.test/world"
    host: HostRevisits | None = None
    pages: dict[str, PageSchedule | None] = {one: None, two: None}
    dues: dict[str, int | None] = {}
    for url, at, links in (
        (one, 0, ("a",)),
        (two, 0, ("x",)),
        (two, HOUR // 2, ("y",)),
        (one, HOUR, ("a",)),
        (two, HOUR, ("z",)),
        (one, 2 * HOUR, ("a", "b")),
    ):
        pages[url], visit = visit_page(pages[url], _answer(url, at, links), None, LEARNED)
        dues[url], host = host_due(host, visit, LEARNED)
    # two: n = 2, X = 2, I = 30 min; one: n = 2, X = 1, I = 1 h
    rate_two = -math.log(0.5 / 2.5) / (HOUR / 2)
    rate_one = -math.log(1.5 / 2.5) / HOUR
    share = square_root_frequencies({one: rate_one, two: rate_two}, 1 / 60_000)[one]
    w_one, w_two = math.sqrt(rate_one), math.sqrt(rate_two)
    assert dues[one] == 2 * HOUR + round(60_000 * (w_one + w_two) / w_one)
    assert dues[one] == 2 * HOUR + round(1 / share)
    assert dues[two] == HOUR + 60_000  # when it was estimated, the only page with a rate
    assert host is not None and host.weight == pytest.approx(w_one + w_two, rel=1e-12)


def test_a_hosts_crawl_delay_bounds_its_budget() -> None:
    url = "http://news.test/"
    page, host = None, None
    for at, links in ((0, ("a",)), (HOUR, ("b",)), (2 * HOUR, ("c",))):
        page, visit = visit_page(
            page, _answer(url, at, links, crawl_delay_ms=120_000), None, LEARNED
        )
        due, host = host_due(host, visit, LEARNED)
    assert due == 2 * HOUR + 120_000  # one request per 2 min at most, below the 1 a minute


def test_a_download_timed_before_the_last_visit_counts_at_it() -> None:
    url = "http://news.test/"
    page, _ = visit_page(None, _answer(url, 5_000, ("a",)), None, LEARNED)
    page, _ = visit_page(page, _answer(url, 4_000, ("b",)), None, LEARNED)
    assert page.page is not None and page.page.last_visit_ms == 5_000 and page.page.changes == 1


def test_records_round_trip_and_bad_bytes_raise_one_error() -> None:
    url = "http://news.test/"
    page, _ = visit_page(None, _answer(url, 5_000, ("a",)), None, LEARNED)
    page, _ = visit_page(page, _answer(url, 9_000, ("b",)), 7_000, LEARNED)
    for record in (page, PageSchedule(answered_ms=3)):
        assert decode_page_schedule(encode_page_schedule(record)) == record
    host = HostRevisits(0.25, 30_000)
    assert decode_host_revisits(encode_host_revisits(host)) == host
    good = encode_page_schedule(page)
    for bad in (good[:10], good[:18], b"\x02" + good[1:], good[:17] + b"\x00" + good[18:]):
        with pytest.raises(StateCodecError):
            decode_page_schedule(bad)
    with pytest.raises(StateCodecError):
        decode_host_revisits(encode_host_revisits(host)[:-1])
