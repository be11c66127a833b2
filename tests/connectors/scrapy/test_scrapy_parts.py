"""The Scrapy adapter's parts on real Scrapy objects, without a broker: what an answer or a
failure becomes (the reference fetcher's PageOutcome and FetchEvent), the settings, the
scheduler's rule for requests the spider yields, and ScalingDecisions on Scrapy's real
downloader."""

from __future__ import annotations

from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.core.downloader import Downloader
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadTimeoutError,
    IgnoreRequest,
    UnsupportedURLSchemeError,
)
from scrapy.http import HtmlResponse, Response, TextResponse
from scrapy.settings import Settings
from scrapy.utils.test import get_crawler
from twisted.internet import error as twisted_error

from frontierflow.connectors.fetcher.events import outcome_event
from frontierflow.connectors.fetcher.outcomes import (
    BAD_URL,
    DNS_ERROR,
    ROBOTS_DISALLOWED,
    TIMEOUT,
    TOO_LARGE,
    TRANSPORT_ERROR,
)
from frontierflow.connectors.scrapy.control import apply_threads
from frontierflow.connectors.scrapy.link import META_KEY, FrontierLink, link_for
from frontierflow.connectors.scrapy.middleware import PushbackMiddleware
from frontierflow.connectors.scrapy.responses import (
    exception_outcome,
    exception_status,
    response_outcome,
)
from frontierflow.connectors.scrapy.scheduler import FrontierScheduler
from frontierflow.connectors.scrapy.settings import ScrapyFrontierSettings
from frontierflow.schemas.records import FrontierEntry
from frontierflow.state.hosts import group_key

ENTRY = FrontierEntry(
    url="http://a.test:8080/dir/page.html",
    host="a.test",
    priority=1.5,
    strategy="ieca",
    crawl_id="c",
    cycle=2,
    via="http://a.test:8080/",
    emitted_at=1,
    echo={"d": "0.3"},
)
BASE = {"FRONTIERFLOW_BOOTSTRAP_SERVERS": "127.0.0.1:9", "FRONTIERFLOW_FETCHER_ID": "s1"}


def test_an_html_answer_becomes_the_fetchers_event_with_links_terms_and_echo() -> None:
    body = (
        b"<html><body><p>socket tcp socket</p>"
        b'<a href="b.html#x">beta</a><a href="/c">gamma</a></body></html>'
    )
    response = HtmlResponse(
        ENTRY.url, status=200, body=body, headers={"Content-Type": "text/html; charset=utf-8"}
    )
    outcome = response_outcome(response, 0.25)
    assert (outcome.status, outcome.size, outcome.fetch_ms) == (200, len(body), 250.0)
    event = outcome_event(ENTRY, outcome, "s1")
    assert event.outlinks == ("http://a.test:8080/dir/b.html", "http://a.test:8080/c")
    assert event.terms == {"socket": 2, "tcp": 1, "beta": 1, "gamma": 1}  # link texts too
    assert (event.via, event.echo, event.cycle, event.crawl_id) == (
        ENTRY.via,
        {"d": "0.3"},
        2,
        "c",
    )
    assert event.bytes == len(body) and event.content_hash and event.fetcher_id == "s1"


def test_a_body_that_is_not_html_is_counted_not_read() -> None:
    response = TextResponse(
        ENTRY.url, status=200, body=b"socket", headers={"Content-Type": "text/plain"}
    )
    outcome = response_outcome(response, 0.0)
    assert outcome.body is None and outcome.size == 6
    event = outcome_event(ENTRY, outcome, "s1")
    assert event.outlinks == () and event.terms is None and event.bytes == 6


def test_a_redirect_is_reported_with_its_target_as_the_only_outlink() -> None:
    response = Response(ENTRY.url, status=301, headers={"Location": "../moved.html"})
    outcome = response_outcome(response, 0.01)
    assert outcome.redirect_to == "http://a.test:8080/moved.html"
    event = outcome_event(ENTRY, outcome, "s1")
    assert event.status == 301 and event.outlinks == ("http://a.test:8080/moved.html",)


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (IgnoreRequest("Forbidden by robots.txt"), ROBOTS_DISALLOWED),
        (IgnoreRequest("Filtered offsite request"), TRANSPORT_ERROR),
        (CannotResolveHostError("a.test"), DNS_ERROR),
        (twisted_error.DNSLookupError("a.test"), DNS_ERROR),
        (DownloadTimeoutError("took longer than 1 s"), TIMEOUT),
        (twisted_error.TimeoutError(), TIMEOUT),
        (twisted_error.TCPTimedOutError(), TIMEOUT),
        (
            DownloadCancelledError(
                "Expected to receive 99 bytes which is larger than download max size (10)"
            ),
            TOO_LARGE,
        ),
        (DownloadCancelledError("cancelled"), TRANSPORT_ERROR),
        (twisted_error.ConnectionRefusedError(), TRANSPORT_ERROR),
        (UnsupportedURLSchemeError("ftp"), BAD_URL),
        (ValueError("anything else"), TRANSPORT_ERROR),
    ],
)
def test_a_failure_gets_the_fetchers_negative_status(exc: Exception, status: int) -> None:
    assert exception_status(exc) == status
    outcome = exception_outcome(ENTRY.url, exc, 0.5)
    event = outcome_event(ENTRY, outcome, "s1")
    assert (event.status, event.fetch_ms, event.outlinks, event.terms) == (status, 500.0, (), None)


def test_settings_are_read_and_checked_once() -> None:
    s = ScrapyFrontierSettings.from_scrapy(
        Settings(
            {
                **BASE,
                "FRONTIERFLOW_TOPICS": {"frontier": "f2", "fetched": "done"},
                "FRONTIERFLOW_MAX_PAGES": "40",
                "FRONTIERFLOW_RESOLVE": "a.test:8080:127.0.0.1,b.test:80:[::1]",
                "FRONTIERFLOW_MIN_CONCURRENCY": 2,
                "FRONTIERFLOW_MAX_CONCURRENCY": 6,
                "FRONTIERFLOW_KAFKA_CLIENT": "kafka-python",
            }
        )
    )
    assert s.kafka.topics.frontier == "f2" and s.kafka.topics.fetched == "done"
    assert s.kafka.topics.fetch_events == "fetch-events"
    assert s.kafka.group_id == "frontierflow-fetchers"
    assert s.kafka.client_library == "kafka-python"
    assert ScrapyFrontierSettings.from_scrapy(Settings(BASE)).kafka.library == "confluent"
    assert s.max_pages == 40 and s.idle_exit_s is None
    assert dict(s.resolve) == {"a.test": "127.0.0.1", "b.test": "::1"}
    assert [s.clamp_concurrency(n) for n in (1, 4, 9)] == [2, 4, 6]


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ({"FRONTIERFLOW_BOOTSTRAP_SERVERS": ""}, "FRONTIERFLOW_BOOTSTRAP_SERVERS"),
        ({"FRONTIERFLOW_FETCHER_ID": ""}, "FRONTIERFLOW_FETCHER_ID"),
        ({"FRONTIERFLOW_TOPICS": {"frontiers": "x"}}, "FRONTIERFLOW_TOPICS"),
        ({"FRONTIERFLOW_MAX_PAGES": -3}, "FRONTIERFLOW_MAX_PAGES"),
        ({"FRONTIERFLOW_IDLE_EXIT": -1}, "FRONTIERFLOW_IDLE_EXIT"),
        ({"FRONTIERFLOW_MIN_CONCURRENCY": 5, "FRONTIERFLOW_MAX_CONCURRENCY": 4}, "CONCURRENCY"),
        ({"FRONTIERFLOW_RESOLVE": "a.test:127.0.0.1"}, "HOST:PORT:ADDR"),
        ({"FRONTIERFLOW_KAFKA_CLIENT": "rdkafka"}, "FRONTIERFLOW_KAFKA_CLIENT"),
    ],
)
def test_bad_settings_are_refused_by_name(override: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        ScrapyFrontierSettings.from_scrapy(Settings({**BASE, **override}))


def test_the_scheduler_drops_the_spiders_requests_and_keeps_retries_of_its_own() -> None:
    crawler = get_crawler(Spider, BASE)
    scheduler = FrontierScheduler.from_crawler(crawler)
    link = link_for(crawler)
    assert scheduler.link is link
    link.pending["7"] = ENTRY  # handed to Scrapy, not answered yet
    retry = Request(ENTRY.url, meta={META_KEY: "7", "retry_times": 1}, dont_filter=True)
    assert scheduler.enqueue_request(retry) is True
    assert scheduler.enqueue_request(Request("http://a.test:8080/elsewhere.html")) is False
    assert scheduler.enqueue_request(Request(ENTRY.url, meta={META_KEY: "8"})) is False
    assert crawler.stats.get_value("frontierflow/spider_requests_dropped") == 2
    assert scheduler.has_pending_requests()
    assert scheduler.next_request() is retry
    del link.pending["7"]  # answered: a late copy of it is the spider's, not the frontier's
    assert scheduler.enqueue_request(retry) is False
    assert scheduler.next_request() is None  # (not opened: nothing read from the frontier)


def test_a_scaling_decision_changes_the_running_downloaders_concurrency() -> None:
    crawler = get_crawler(Spider, {"CONCURRENT_REQUESTS": 4})
    downloader = Downloader(crawler)
    downloader.active.update(Request(f"http://a.test/{i}") for i in range(4))
    assert downloader.needs_backout()  # 4 in flight of 4
    assert apply_threads(downloader, 6) == 4
    assert not downloader.needs_backout()  # room for 2 more
    assert apply_threads(downloader, 6) is None  # no change
    assert apply_threads(downloader, 2) == 6
    assert downloader.needs_backout()
    downloader.close()


class _Recorder:
    """Stands in for the Kafka publisher: what the link would send, in order."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, Any]] = []

    def publish(self, event: Any) -> None:
        self.sent.append(("event", event))

    def answered(self, entry: FrontierEntry) -> None:
        self.sent.append(("answered", entry))

    def record_fetch(self, event: Any) -> None:
        self.sent.append(("fetched", event))

    def dead(self, letter: Any) -> None:
        self.sent.append(("dead", letter))


def _entry(url: str, priority: float, **fields: Any) -> FrontierEntry:
    host = url.split("/")[2].split(":")[0]
    values: dict[str, Any] = {
        "url": url,
        "host": host,
        "priority": priority,
        "strategy": "ieca",
        "crawl_id": "c",
        "cycle": 1,
        "via": None,
        "emitted_at": 1,
        "echo": {},
    }
    return FrontierEntry(**{**values, **fields})


def _opened_link(crawler: Any) -> tuple[FrontierLink, _Recorder]:
    """The crawler's link as if open and caught up, publishing into a recorder."""
    link = link_for(crawler)
    recorder = _Recorder()
    link._publisher = recorder  # type: ignore[assignment]
    link.opened = True
    link.reader.caught_up = True
    return link, recorder


def test_the_best_entry_of_a_free_host_goes_first_and_the_budget_counts_handouts() -> None:
    crawler = get_crawler(Spider, {**BASE, "FRONTIERFLOW_MAX_PAGES": 3})
    link, recorder = _opened_link(crawler)
    for e in (
        _entry("http://a.test/1", 1.0),
        _entry("http://a.test/2", 5.0),
        _entry("http://b.test/1", 3.0),
        _entry("http://b.test/2", 0.5),
    ):
        link.queues.offer(e)

    first = link.next_request()
    second = link.next_request()
    assert first is not None and second is not None
    assert (first.url, second.url) == ("http://a.test/2", "http://b.test/1")
    assert link.next_request() is None  # both hosts have a request in Scrapy's hands
    assert not link.finished()

    response = HtmlResponse(
        "http://a.test/2", body=b"<a href='/9'>x</a>", headers={"Content-Type": "text/html"}
    )
    event = link.answer(first.meta[META_KEY], response_outcome(response, 0.01))
    assert event is not None and event.outlinks == ("http://a.test/9",)
    assert [kind for kind, _ in recorder.sent] == ["event", "answered", "fetched"]
    assert link.answer(first.meta[META_KEY], response_outcome(response, 0.01)) is None  # once

    third = link.next_request()  # a.test is free again: its remaining entry
    assert third is not None and third.url == "http://a.test/1"
    assert link.next_request() is None  # budget of 3 handed out; b.test/2 stays queued
    assert link.reserved == 3 and not link.finished()  # two answers outstanding
    for request in (second, third):  # answers that stand (a time-out would be tried again)
        gone = HtmlResponse(request.url, status=404, headers={"Content-Type": "text/html"})
        link.answer(request.meta[META_KEY], response_outcome(gone, 1.0))
    assert link.finished() and len(link.queues) == 1


def test_a_timeout_is_tried_again_and_a_429_pauses_its_host() -> None:
    crawler = get_crawler(Spider, BASE)
    link, recorder = _opened_link(crawler)
    link.queues.offer(_entry("http://a.test/1", 2.0))
    link.queues.offer(_entry("http://b.test/1", 1.0))
    first = link.next_request()
    assert first is not None and first.url == "http://a.test/1"
    event = link.answer(first.meta[META_KEY], exception_outcome(first.url, TimeoutError(), 1.0))
    assert event is not None and event.will_retry and event.failure == "transport-error"
    assert [kind for kind, _ in recorder.sent] == ["event", "fetched"]  # not answered yet
    assert link.reserved == 0 and len(link.queues) == 2  # the entry is back
    second = link.next_request()
    assert second is not None
    busy = HtmlResponse(second.url, status=429, headers={"Retry-After": "120"})
    event = link.answer(second.meta[META_KEY], response_outcome(busy, 0.01))
    assert event is not None and event.will_retry and event.retry_after_ms == 120_000
    # its host is paused for two minutes: nothing of it is handed to Scrapy meanwhile
    paused = [r.url for r in iter(link.next_request, None)]
    assert second.url not in paused


def test_a_reply_request_for_a_page_fetched_is_answered_208_without_scrapy() -> None:
    crawler = get_crawler(Spider, BASE)
    link, recorder = _opened_link(crawler)
    link.queues.mark_url_fetched("c", 1, "http://a.test/p")
    reply = _entry("http://a.test/p", 2.0, via="http://a.test/", echo={"reply": "1", "push": "9"})
    link.queues.offer(reply)
    link.queues.offer(_entry("http://a.test/p", 9.0))  # a plain entry for it: dropped

    assert link.next_request() is None and link.reserved == 0
    (kind, event), (kind2, answered) = recorder.sent
    assert (kind, kind2) == ("event", "answered") and answered is reply
    assert (event.status, event.via, event.echo) == (208, "http://a.test/", reply.echo)


def test_scrapys_own_retry_of_a_429_waits_for_the_pause() -> None:
    """RetryMiddleware turns a 429 into a retry before the FetchEvent middleware sees it;
    PushbackMiddleware (above it) hands the host to the host rule first, so the scheduler
    holds the retry and the host's other entries while another host goes on."""
    crawler = get_crawler(Spider, BASE)
    scheduler = FrontierScheduler.from_crawler(crawler)
    link, _ = _opened_link(crawler)
    assert scheduler.link is link
    link.queues.offer(_entry("http://a.test/1", 3.0))
    link.queues.offer(_entry("http://a.test/2", 2.0))
    link.queues.offer(_entry("http://b.test/1", 1.0))
    first = link.next_request()
    assert first is not None and first.url == "http://a.test/1"
    busy = HtmlResponse(first.url, status=429, headers={"Retry-After": "120"})
    PushbackMiddleware(link).process_response(first, busy)
    retry = first.replace(dont_filter=True)
    assert scheduler.enqueue_request(retry)
    served = scheduler.next_request()
    assert served is not None and served.url == "http://b.test/1"  # a.test waits 120 s
    assert scheduler.next_request() is None and len(scheduler.retries) == 1
    # when Scrapy gives up, the answer is the frontier's to retry: taken once by the rule
    event = link.answer(first.meta[META_KEY], response_outcome(busy, 0.01))
    assert event is not None and event.will_retry
    state = link.queues.states[group_key("c", "a.test")]
    assert (state.pauses, state.level) == (1, 1)


class _Slot:
    """Stands in for Scrapy's engine slot: counts the scheduling rounds asked for."""

    def __init__(self) -> None:
        self.rounds = 0
        self.nextcall = self

    def schedule(self) -> None:
        self.rounds += 1


def test_an_entry_not_before_its_time_is_handed_over_when_it_comes() -> None:
    """An entry whose `not_before` lies ahead (a paused host, a scheduled revisit) is not
    handed to Scrapy before then, and the link asks the engine for a scheduling round at
    that time rather than at the engine's next heartbeat."""
    from twisted.internet.task import Clock

    crawler = get_crawler(Spider, BASE)
    link, _ = _opened_link(crawler)
    reactor, engine = Clock(), type("Engine", (), {"_slot": type("S", (), {})()})()
    slot = _Slot()
    engine._slot = slot
    link._reactor, link._engine = reactor, engine
    now = [1_000.0]
    link.clock = lambda: now[0]
    link.queues.offer(_entry("http://a.test/later", 9.0, not_before=1_090_000))
    assert link.next_request() is None
    (call,) = reactor.getDelayedCalls()
    assert call.getTime() == 90.0  # 1,090 s − 1,000 s on the reactor's clock
    link.queues.offer(_entry("http://b.test/sooner", 1.0, not_before=1_010_000))
    assert link.next_request() is None
    assert sorted(c.getTime() for c in reactor.getDelayedCalls() if c.active()) == [10.0]
    now[0], rounds = 1_010.0, slot.rounds
    reactor.advance(10.0)
    assert slot.rounds == rounds + 1
    served = link.next_request()
    assert served is not None and served.url == "http://b.test/sooner"
    assert link.next_request() is None  # a.test/later is not due before 1,090 s
    now[0] = 1_090.0
    later = link.next_request()
    assert later is not None and later.url == "http://a.test/later"
