"""The hostile web of tests/hostile_web.py checked on its own with a plain HTTP client
(http.client to 127.0.0.1:PORT with a Host header): the good site's shape and size, busy.test's
429 pauses and the log's view of them, the calendar trap, flaky, moved, polite, slow."""

from __future__ import annotations

import gc
import http.client
import re
import socket
import threading
import time
import warnings
from collections import deque
from email.message import Message
from email.utils import parsedate_to_datetime
from urllib.parse import urljoin, urlsplit

import pytest
from hostile_web import HostileWeb, Request, http_date_up

HREF = re.compile(r'href="([^"]*)"')


def get(web: HostileWeb, host: str, path: str) -> tuple[int, Message, str]:
    """GET ``path`` from ``host`` (Host header with the port, as a browser sends it)."""
    conn = http.client.HTTPConnection("127.0.0.1", web.port, timeout=10)
    try:
        conn.request("GET", path, headers={"Host": f"{host}:{web.port}"})
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read().decode()
    finally:
        conn.close()


def hrefs(body: str) -> list[str]:
    return HREF.findall(body)


def reachable(web: HostileWeb, host: str) -> set[str]:
    """URLs of ``host`` reachable from its ``/`` by following links (BFS), each fetched once;
    every one must answer 200."""
    start = f"{web.base(host)}/"
    seen = {start}
    queue = deque([start])
    while queue:
        url = queue.popleft()
        parts = urlsplit(url)
        assert parts.hostname is not None
        status, _, body = get(web, parts.hostname, parts.path)
        assert status == 200, url
        for href in hrefs(body):
            target = urljoin(url, href).partition("#")[0]
            if urlsplit(target).hostname == host and target not in seen:
                seen.add(target)
                queue.append(target)
    return seen


def test_addresses_unknown_hosts_and_paths() -> None:
    with HostileWeb() as web:
        port = web.port
        assert web.base("good.test") == f"http://good.test:{port}"
        assert web.resolve_args() == [
            f"{h}:{port}:127.0.0.1"
            for h in (
                "good.test",
                "busy.test",
                "calendar.test",
                "slow.test",
                "flaky.test",
                "polite.test",
                "moved.test",
            )
        ]
        assert web.seeds() == [
            f"http://good.test:{port}/",
            f"http://busy.test:{port}/",
            f"http://calendar.test:{port}/",
            f"http://slow.test:{port}/",
        ]
        assert get(web, "nowhere.test", "/")[0] == 404
        assert get(web, "nowhere.test", "/robots.txt")[0] == 404
        assert get(web, "good.test", "/nope.html")[0] == 404
        assert get(web, "good.test", "/s/11/")[0] == 404
        assert get(web, "good.test", "/s/10/a29.html")[0] == 404  # section 10 has 28
        status, _, robots = get(web, "good.test", "/robots.txt")
        assert (status, robots) == (200, "User-agent: *\nAllow: /\n")
        log = web.requests()
        assert [(r.host, r.path, r.status) for r in log] == [
            ("nowhere.test", "/", 404),
            ("nowhere.test", "/robots.txt", 404),
            ("good.test", "/nope.html", 404),
            ("good.test", "/s/11/", 404),
            ("good.test", "/s/10/a29.html", 404),
            ("good.test", "/robots.txt", 200),
        ]
        assert all(r.started <= r.answered for r in log)
        assert web.pages_served("good.test") == 0
        assert len(web.requests("good.test")) == 4


def test_custom_host_names() -> None:
    with HostileWeb(good_host="Good.Example", calendar_host="cal.example") as web:
        status, _, body = get(web, "good.example", "/")
        assert status == 200
        assert f"http://cal.example:{web.port}/day/1" in hrefs(body)
        assert web.requests()[0].host == "good.example"


def test_good_index_links_sections_and_the_calendar_once() -> None:
    with HostileWeb() as web:
        status, _, body = get(web, "good.test", "/")
        assert status == 200
        links = hrefs(body)
        base = f"http://good.test:{web.port}"
        assert links == [
            *(f"{base}/s/{k}/" for k in range(1, 11)),
            f"http://calendar.test:{web.port}/day/1",
        ]
        # 289 articles: sections 1..9 hold 29, section 10 holds 28
        for k, articles in ((1, 29), (9, 29), (10, 28)):
            _, _, section = get(web, "good.test", f"/s/{k}/")
            found = [h for h in hrefs(section) if h.startswith(f"{base}/s/{k}/a")]
            assert len(found) == articles
            assert f"{base}/" in hrefs(section)
            assert len([h for h in hrefs(section) if re.fullmatch(r".*/s/\d+/", h)]) == 9
        _, _, article = get(web, "good.test", "/s/10/a1.html")
        assert hrefs(article) == [
            f"{base}/s/10/",
            f"{base}/s/10/a28.html",
            f"{base}/s/10/a2.html",
        ]


@pytest.mark.parametrize(("good_pages", "expected"), [(300, 300), (25, 25), (11, 11)])
def test_good_site_reachable_from_the_index_is_exactly_good_pages(
    good_pages: int, expected: int
) -> None:
    with HostileWeb(good_pages=good_pages) as web:
        found = reachable(web, "good.test")
        assert len(found) == expected
        assert web.pages_served("good.test") == expected
        assert len(web.requests("good.test")) == expected
        assert web.requests("calendar.test") == []


class ManualClock:
    """Epoch seconds that move when the test says so (no sleeping for a pause), and by one
    millisecond at each reading, so a request is answered after it started."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        self.now += 0.001
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_busy_answers_429_after_the_burst_and_the_log_sees_a_request_inside_the_pause() -> None:
    clock = ManualClock()
    with HostileWeb(busy_burst=5, busy_window_s=10, busy_retry_after_s=2, clock=clock) as web:
        assert get(web, "busy.test", "/robots.txt")[0] == 200  # does not count
        for path in ("/", "/p1.html", "/p2.html", "/p3.html", "/p4.html"):
            assert get(web, "busy.test", path)[0] == 200
        status, headers, _ = get(web, "busy.test", "/p5.html")
        assert (status, headers["Retry-After"]) == (429, "2")
        status, headers, _ = get(web, "busy.test", "/p6.html")  # inside the pause
        assert (status, headers["Retry-After"]) == (429, "2")  # ceil(2 - a few ms)
        assert get(web, "busy.test", "/robots.txt")[0] == 200  # never rate limited

        log = web.requests("busy.test")
        first, second = log[6], log[7]
        assert (first.path, second.path) == ("/p5.html", "/p6.html")
        assert first.retry_after_until == first.started + 2
        assert second.retry_after_until == second.started + 2
        assert web.announced_pauses("busy.test") == [
            (first.started, first.started + 2),
            (second.started, second.started + 2),
        ]
        # /p6.html and the second robots.txt started inside /p5.html's pause
        assert [r.path for r in web.requests_inside_pauses("busy.test")] == [
            "/p6.html",
            "/robots.txt",
        ]
        assert web.requests_inside_pauses("busy.test", pages_only=True) == [second]
        assert web.requests_inside_pauses("good.test") == []

        end = max(e for _, e in web.announced_pauses("busy.test"))
        clock.advance(end - clock() + 0.05)  # past the pause
        # after the pause: the 5 pages are still within the 10 s window, so a new pause
        status, headers, _ = get(web, "busy.test", "/p7.html")
        assert (status, headers["Retry-After"]) == (429, "2")
        assert [r.path for r in web.requests_inside_pauses("busy.test", pages_only=True)] == [
            "/p6.html"
        ]
        assert len(web.announced_pauses("busy.test")) == 3
        assert web.pages_served("busy.test") == 5


def test_busy_serves_again_once_the_pause_and_the_window_are_over() -> None:
    clock = ManualClock()
    with HostileWeb(busy_burst=2, busy_window_s=1, busy_retry_after_s=1, clock=clock) as web:
        assert get(web, "busy.test", "/")[0] == 200
        assert get(web, "busy.test", "/p1.html")[0] == 200
        status, headers, _ = get(web, "busy.test", "/p2.html")
        assert (status, headers["Retry-After"]) == (429, "1")
        ((_, end),) = web.announced_pauses("busy.test")
        clock.advance(end - clock() + 0.05)
        assert get(web, "busy.test", "/p2.html")[0] == 200
        assert web.requests_inside_pauses() == []
        assert web.pages_served("busy.test") == 3


def test_http_date_up_rounds_up_to_the_next_whole_second() -> None:
    # 1_700_000_000 is Tue, 14 Nov 2023 22:13:20 UTC
    assert http_date_up(1_700_000_015.25) == ("Tue, 14 Nov 2023 22:13:36 GMT", 1_700_000_016.0)
    assert http_date_up(1_700_000_016.0) == ("Tue, 14 Nov 2023 22:13:36 GMT", 1_700_000_016.0)
    assert http_date_up(1_700_000_016.001)[1] == 1_700_000_017.0


def test_busy_retry_after_as_an_http_date_is_never_earlier_than_the_pause() -> None:
    with HostileWeb(busy_burst=1, busy_retry_after_s=3, busy_retry_after_form="date") as web:
        assert get(web, "busy.test", "/")[0] == 200
        status, headers, _ = get(web, "busy.test", "/p1.html")
        assert status == 429
        announced = parsedate_to_datetime(headers["Retry-After"]).timestamp()
        record = web.requests("busy.test")[-1]
        assert record.retry_after_until == announced
        assert announced == int(announced)
        assert record.started + 3 <= announced < record.started + 4
        assert web.announced_pauses("busy.test") == [(record.started, announced)]


def test_busy_without_retry_after_announces_no_pause() -> None:
    with HostileWeb(busy_burst=1, busy_retry_after_s=3, busy_retry_after_form="none") as web:
        assert get(web, "busy.test", "/")[0] == 200
        status, headers, _ = get(web, "busy.test", "/p1.html")
        assert (status, headers["Retry-After"]) == (429, None)
        assert get(web, "busy.test", "/p2.html")[0] == 429  # still paused, silently
        assert web.announced_pauses("busy.test") == []
        assert web.requests_inside_pauses() == []
        assert [r.retry_after_until for r in web.requests("busy.test")] == [None, None, None]


def test_log_queries_on_a_hand_made_log() -> None:
    """Overlaps a live server cannot make on cue: B starts before A's 429 is answered."""
    a = Request("busy.test", "/p5.html", 100.0, 100.5, 429, 110.0)
    b = Request("busy.test", "/p6.html", 100.2, 100.3, 429, None)  # before A answered
    c = Request("busy.test", "/p7.html", 105.0, 105.1, 429, None)  # inside
    d = Request("busy.test", "/p8.html", 110.0, 111.0, 200, None)  # at the end: not inside
    e = Request("good.test", "/", 105.0, 105.2, 200, None)  # another host
    web = HostileWeb()
    with web._lock:  # the module's own test may fill its log by hand
        web._log.extend([a, b, e, c, d])
    assert web.announced_pauses("busy.test") == [(100.0, 110.0)]
    assert web.requests_inside_pauses() == [c]
    assert web.requests_inside_pauses("good.test") == []
    # gaps by arrival: b - a = 100.2 - 100.5, c - b = 105.0 - 100.3, d - c = 110.0 - 105.1
    assert web.min_gap("busy.test") == pytest.approx(-0.3)
    assert web.min_gap("good.test") is None
    assert web.pages_served("busy.test") == 1


def test_calendar_is_endless() -> None:
    with HostileWeb() as web:
        base = f"http://calendar.test:{web.port}"
        status, _, body = get(web, "calendar.test", "/day/7")
        assert status == 200
        assert hrefs(body) == [f"{base}/day/8", f"{base}/day/9", f"{base}/day/10", f"{base}/"]
        assert hrefs(get(web, "calendar.test", "/")[2]) == [f"{base}/day/1"]
        status, _, body = get(web, "calendar.test", "/day/99999999999999999999")
        assert status == 200
        assert hrefs(body)[0] == f"{base}/day/100000000000000000000"
        assert get(web, "calendar.test", "/day/0")[0] == 404
        assert get(web, "calendar.test", "/day/x")[0] == 404


def test_flaky_fails_four_times_then_serves() -> None:
    with HostileWeb() as web:
        assert get(web, "flaky.test", "/robots.txt")[0] == 200  # not counted
        for _ in range(4):
            status, headers, _ = get(web, "flaky.test", "/")
            assert (status, headers["Retry-After"]) == (503, None)
        status, _, body = get(web, "flaky.test", "/")
        assert status == 200
        base = f"http://flaky.test:{web.port}"
        assert hrefs(body) == [f"{base}/p1.html", f"{base}/p2.html"]
        assert get(web, "flaky.test", "/p9.html")[0] == 200
        assert get(web, "flaky.test", "/p10.html")[0] == 404
        assert [r.status for r in web.requests("flaky.test")] == [
            200,
            503,
            503,
            503,
            503,
            200,
            200,
            404,
        ]
        assert web.announced_pauses("flaky.test") == []
        assert web.pages_served("flaky.test") == 2


def test_moved_redirects_every_path_to_good() -> None:
    with HostileWeb() as web:
        for path in ("/", "/a/b.html"):
            status, headers, _ = get(web, "moved.test", path)
            assert (status, headers["Location"]) == (301, f"http://good.test:{web.port}/")
        assert get(web, "moved.test", "/robots.txt")[0] == 200


def test_polite_asks_for_a_crawl_delay_and_min_gap_measures_it() -> None:
    clock = ManualClock()
    with HostileWeb(clock=clock) as web:
        status, _, robots = get(web, "polite.test", "/robots.txt")
        assert (status, robots) == (200, "User-agent: *\nCrawl-delay: 2\n")
        assert web.min_gap("polite.test") is None
        assert web.min_gap("polite.test", pages_only=True) is None
        assert get(web, "polite.test", "/")[0] == 200
        clock.advance(0.3)
        assert get(web, "polite.test", "/p1.html")[0] == 200
        gap = web.min_gap("polite.test", pages_only=True)
        assert gap is not None and 0.3 <= gap < 2
        first_gap = web.min_gap("polite.test")  # robots.txt then / at once
        assert first_gap is not None and first_gap < 0.3
        assert web.pages_served("polite.test") == 2
        assert len(reachable(web, "polite.test")) == 10


def test_slow_answers_after_its_delay() -> None:
    with HostileWeb(slow_pages=3, slow_delay_s=0.3) as web:
        t0 = time.monotonic()
        status, _, body = get(web, "slow.test", "/")
        assert status == 200 and time.monotonic() - t0 >= 0.3
        base = f"http://slow.test:{web.port}"
        assert hrefs(body) == [f"{base}/p1.html", f"{base}/p2.html"]
        assert get(web, "slow.test", "/robots.txt")[0] == 200
        page, robots = web.requests("slow.test")
        assert page.answered - page.started >= 0.3
        assert robots.answered - robots.started < 0.3


def test_stops_cleanly() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with HostileWeb() as web:
            port = web.port
            assert get(web, "good.test", "/")[0] == 200
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert not any(t.name == "hostile-web" for t in threading.enumerate())
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
