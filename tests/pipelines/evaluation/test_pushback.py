"""crawl-report's pushback figures (pipelines/evaluation/pushback.py), worked out by hand:
a host announced a 15 s pause at t=100 s; the access log has requests at 101 s (inside)
and 116 s (after); another host backed off without Retry-After."""

from __future__ import annotations

from frontierflow.pipelines.evaluation.pushback import (
    announced_pauses,
    host_budgets,
    requests_inside_pauses,
)
from frontierflow.pipelines.evaluation.realcrawl import AccessLine
from frontierflow.schemas.records import FetchEvent


def event(host: str, at_s: float, status: int = 200, **fields: object) -> FetchEvent:
    return FetchEvent(
        url=f"http://{host}/{at_s}",
        fetched_at=int(at_s * 1000),
        status=status,
        fetcher_id="f1",
        host=host,
        **fields,  # type: ignore[arg-type]
    )


def line(host: str, start: float) -> AccessLine:
    return AccessLine(start, start + 0.01, host, "GET", "/", 200, 10)


EVENTS = [
    event("busy.test", 99.0),
    event("busy.test", 100.0, 429, retry_after_ms=15_000, will_retry=True),
    event("busy.test", 116.0),
    event("down.test", 50.0, 503),  # no Retry-After: a 60 s back-off, not announced
    event("good.test", 10.0),
    event("good.test", 11.0),
    event("good.test", 12.0),
    event("good.test", 13.0),
    event("good.test", 14.0, 208),  # answered without a request: not a download
]
LINES = [
    line("busy.test", 99.0),
    line("busy.test", 100.0),  # the one that was answered 429: not inside (start == 100)
    line("busy.test", 101.0),  # inside (100, 115)
    line("busy.test", 116.0),
    line("down.test", 55.0),  # inside a back-off, but none was announced
    line("good.test", 10.0),
]


def test_announced_pauses_and_requests_inside() -> None:
    assert announced_pauses(EVENTS) == {"busy.test": [(100.0, 115.0)]}
    inside = requests_inside_pauses(LINES, announced_pauses(EVENTS))
    assert [(r.host, r.start) for r in inside] == [("busy.test", 101.0)]


def test_host_budgets_busiest_first() -> None:
    budgets = host_budgets(EVENTS, LINES)
    # downloads: good 4, busy 3, down 1 (of 8)
    assert [(b.host, b.downloads, b.share) for b in budgets] == [
        ("good.test", 4, 0.5),
        ("busy.test", 3, 0.375),
        ("down.test", 1, 0.125),
    ]
    by_host = {b.host: b for b in budgets}
    assert (by_host["busy.test"].pushed_back, by_host["busy.test"].pauses) == (1, 1)
    assert by_host["busy.test"].inside_pause == 1
    assert (by_host["down.test"].pushed_back, by_host["down.test"].pauses) == (1, 1)
    assert by_host["down.test"].inside_pause == 0
    assert (by_host["good.test"].pauses, by_host["good.test"].inside_pause) == (0, 0)
