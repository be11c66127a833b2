"""The real crawl's report: the access-log reader, politeness per host, precision and
pages/s, worked out by hand on small inputs."""

from __future__ import annotations

from pathlib import Path

from frontierflow.pipelines.evaluation.realcrawl import (
    politeness,
    read_access_log,
    summarise,
)
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.relevance import Judge, Topic

LOG = """\
1000.100 0.020 a.test "GET /robots.txt HTTP/1.1" 404 146
1000.200 0.050 a.test "GET /x.html HTTP/1.1" 200 900
1000.260 0.010 b.test "GET /y.html HTTP/1.1" 200 10
1000.290 0.030 a.test "GET /z.html HTTP/1.1" 301 0
1001.500 0.000 b.test "GET /w.html HTTP/1.1" 200 10
"""


def test_access_log_and_politeness(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    path.write_text(LOG)
    lines = read_access_log(path)
    assert [(round(x.start, 3), x.host, x.path, x.status) for x in lines] == [
        (1000.08, "a.test", "/robots.txt", 404),
        (1000.15, "a.test", "/x.html", 200),
        (1000.25, "b.test", "/y.html", 200),
        (1000.26, "a.test", "/z.html", 301),
        (1001.5, "b.test", "/w.html", 200),
    ]
    a, b = politeness(lines, 0.1)
    # a.test starts at 1000.08, 1000.15, 1000.26: gaps 0.07 (a violation of 0.1) and 0.11
    assert (a.host, a.requests, round(a.min_gap_s, 3), a.violations, a.busiest_second) == (
        "a.test", 3, 0.07, 1, 3,
    )  # fmt: skip
    # b.test: one gap of 1.25 s, one request in each of two seconds
    assert (b.requests, round(b.min_gap_s, 3), b.violations, b.busiest_second) == (2, 1.25, 0, 1)
    # a per-host delay: 0.07 is fine for a host allowed 0.05
    assert politeness(lines, {"a.test": 0.05})[0].violations == 0


def _event(url: str, at: int, status: int = 200, terms: dict[str, int] | None = None) -> FetchEvent:
    return FetchEvent(url, at, status, "f", "a.test", terms=terms)


def test_precision_counts_downloads_not_answers_and_pages_per_second() -> None:
    topic = Topic.parse("socket tcp")
    judge = Judge(0.5, 2)
    events = [
        _event("http://a.test/1", 1000, terms={"socket": 3, "tcp": 1}),  # sim 0.89, 4 kw
        _event("http://a.test/2", 1500, terms={"socket": 1}),  # sim 0.71 but 1 keyword
        _event("http://a.test/1", 1700, status=208),  # an answer: not a download
        _event("http://a.test/3", 3000, status=-1),  # an error counts as a download
    ]
    s = summarise(events, topic, judge)
    assert (s.downloads, s.answered, s.errors, s.html_pages) == (3, 1, 1, 2)
    assert s.relevant_by_event_terms == 1 and s.precision == 1 / 3
    assert s.seconds == 2.0 and s.pages_per_s == 1.5  # 3 downloads from t=1.0 s to t=3.0 s


def test_pages_judged_on_the_recorded_webs_terms_through_the_url_map() -> None:
    import numpy as np

    from frontierflow.connectors.topicalweb import TopicalWeb

    web = TopicalWeb(
        urls=["https://m.docs.invalid/index.html", "https://m.docs.invalid/a.html"],
        offsets=np.array([0, 1, 1]),
        links=np.array([1]),
        terms=[{"socket": 2, "tcp": 2}, {"kernel": 1}],
    )
    served = "http://m.docs.test:8080/"
    events = [
        _event(served, 1, terms={"socket": 2, "tcp": 2}),  # a folder: its index.html
        _event(served + "a.html", 2, terms={"kernel": 2}),  # terms differ from the web's
        _event(served + "gone.html", 3, status=404),  # not a page of the web
    ]
    s = summarise(
        events, Topic.parse("socket tcp"), Judge(0.5), web, {served: "https://m.docs.invalid/"}
    )
    assert (s.in_web, s.terms_agree, s.relevant_by_web_terms) == (2, 1, 1)
    assert s.precision_web == 1 / 3 and s.precision == 1 / 3
