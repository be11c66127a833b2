"""A real crawl on loopback: nginx serves a small site the test writes (three hosts, one
with a robots.txt), the live job runs LAFC on a real broker, seeds arrive through
`frontierflow seed`, and the reference fetcher crawls over HTTP until its budget; the job,
the seeds and the fetcher all on one Kafka client library, once with each.

Read back from nginx's access log and the topics: every page fetched was asked for by a
frontier entry, none twice, the budget holds, no host saw two requests closer than its
delay (robots.txt's Crawl-delay where longer), disallowed paths were never requested and
were answered with a negative status; the job applied every FetchEvent and the speed
controller's decisions reached the fetcher."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from live_job import start_seeded_lafc

from frontierflow.connectors.fetcher.http import ROBOTS_DISALLOWED
from frontierflow.connectors.fetcher.loop import Fetcher
from frontierflow.connectors.fetcher.settings import FetcherSettings
from frontierflow.connectors.kafka import ensure_topics
from frontierflow.schemas.codecs import decode_record
from frontierflow.schemas.records import FetchEvent, FrontierEntry, ScalingDecision

pytestmark = pytest.mark.kafka

HOSTS = ("a.test", "b.test", "c.test")
PAGES = 70
BUDGET = 120
DELAY_S = 0.05
CRAWL_DELAY_S = 0.15  # c.test's robots.txt
SLACK_S = 0.0015  # nginx logs times in whole milliseconds


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_real_crawl_on_loopback(
    kafka_broker: Any,
    kafka_client: Any,
    nginx_sites: Any,
    linked_site: Any,
    tmp_path: Path,
    client: str,
) -> None:
    sites = linked_site(tmp_path / "site", HOSTS, PAGES, robots_host="c.test")
    (sites["c.test"] / "robots.txt").write_text(
        f"User-agent: *\nDisallow: /private/\nCrawl-delay: {CRAWL_DELAY_S}\n"
    )
    nginx = nginx_sites(sites)
    linked_site.fill_port(sites, nginx.port)
    settings = dataclasses.replace(
        kafka_client.settings(kafka_broker.bootstrap), client_library=client
    )
    ensure_topics(settings)

    seeds = [f"http://{host}:{nginx.port}/index.html" for host in HOSTS]
    job = start_seeded_lafc(settings, tmp_path / "state", seeds, "live")

    fetcher_kafka = dataclasses.replace(settings, group_id=f"{settings.group_id}-fetchers")
    fetcher = Fetcher(
        FetcherSettings(
            fetcher_id="f1",
            delay_s=DELAY_S,
            allow_private=True,
            resolve={(h, nginx.port): "127.0.0.1" for h in HOSTS},
            workers=4,
            max_workers=8,
            max_pages=BUDGET,
            idle_exit_s=30,
        ),
        fetcher_kafka,
    )
    started = time.monotonic()
    stats = fetcher.run()
    crawl_s = time.monotonic() - started
    try:
        job.wait_applied(stats.events)
    finally:
        job.close()

    # the budget holds, and the fetcher published one event per entry it took
    assert stats.downloads == BUDGET, (stats, crawl_s)
    events = [
        decode_record(FetchEvent, v)
        for _, v in kafka_client.read_topic(settings, settings.topics.fetch_events)
    ]
    assert len(events) == stats.events == BUDGET + stats.answered
    assert sum(e.status != 208 for e in events) == BUDGET
    assert {e.fetcher_id for e in events} == {"f1"} and {e.crawl_id for e in events} == {"live"}

    # nginx saw each page once, and only pages the frontier asked for
    requests = nginx.requests()
    pages = [r for r in requests if r.path != "/robots.txt"]
    asked = {
        decode_record(FrontierEntry, v).url
        for _, v in kafka_client.read_topic(settings, settings.topics.frontier)
        if v is not None
    }
    urls = [f"http://{r.host}:{nginx.port}{r.path}" for r in pages]
    assert Counter(urls).most_common(1)[0][1] == 1, "a page was fetched twice"
    assert set(urls) <= asked
    assert len(pages) == sum(e.status > 0 and e.status != 208 for e in events)
    assert {r.path for r in requests if r.path == "/robots.txt"} and all(
        sum(1 for r in requests if r.host == h and r.path == "/robots.txt") <= 1 for h in HOSTS
    )
    missing = [r for r in pages if r.path.endswith("/missing.html")]  # answered 404 ...
    assert all(r.status == 404 for r in missing)
    assert sum(e.status == 404 for e in events) == len(missing)  # ... and reported so

    # robots.txt: /private/ never requested; its entries answered with a negative status
    assert not [r for r in requests if r.path.startswith("/private/")]
    assert any(e.status == ROBOTS_DISALLOWED for e in events)

    # politeness: per host, request starts at least the host's delay apart
    starts: dict[str, list[float]] = defaultdict(list)
    for r in requests:
        starts[r.host].append(r.start)
    for host, times in starts.items():
        times.sort()
        gaps = [b - a for a, b in itertools.pairwise(times)]
        delay = CRAWL_DELAY_S if host == "c.test" else DELAY_S
        assert min(gaps) >= delay - SLACK_S, (host, min(gaps))
    assert set(starts) == set(HOSTS)

    # the speed controller decided for this fetcher on fetcher-control
    decisions = [
        decode_record(ScalingDecision, v)
        for _, v in kafka_client.read_topic(settings, settings.topics.fetcher_control)
    ]
    assert decisions and {d.fetcher_id for d in decisions} == {"f1"}
