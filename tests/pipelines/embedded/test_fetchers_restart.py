"""Many fetchers, one frontier: two reference fetchers share a four-partition frontier as
one consumer group (partitions by host), one of them is stopped mid-crawl and started
again, and the LAFC crawl still ends with every page downloaded once and every reply
request answered exactly once (none lost to compaction or to the hand-over)."""

from __future__ import annotations

import dataclasses
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from live_job import LiveJob
from polling import wait_for

from frontierflow.connectors.fetcher.loop import Fetcher, FetcherStats
from frontierflow.connectors.fetcher.settings import FetcherSettings
from frontierflow.connectors.kafka import ensure_topics
from frontierflow.pipelines.embedded.live import LiveOptions
from frontierflow.pipelines.strategies.lafc import ECHO_PUSH, Lafc, LafcSettings
from frontierflow.schemas.codecs import decode_record, encode_record
from frontierflow.schemas.records import REPLY_ECHO, FetchEvent, FrontierEntry, SeedRequest
from frontierflow.state.relevance import Topic

pytestmark = pytest.mark.kafka

HOSTS = ("a.test", "b.test", "c.test")
PAGES = 25


class _Running:
    """A fetcher in a thread of its own."""

    def __init__(self, fetcher: Fetcher) -> None:
        self.fetcher = fetcher
        self.stats: FetcherStats | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.stats = self.fetcher.run()


def test_two_fetchers_and_a_restart_mid_crawl_lose_no_reply_and_fetch_nothing_twice(
    kafka_broker: Any, kafka_client: Any, nginx_sites: Any, linked_site: Any, tmp_path: Path
) -> None:
    sites = linked_site(tmp_path / "site", HOSTS, PAGES, seed=11)
    nginx = nginx_sites(sites)
    linked_site.fill_port(sites, nginx.port)
    settings = dataclasses.replace(kafka_client.settings(kafka_broker.bootstrap), partitions=4)
    ensure_topics(settings)

    strategy = Lafc(Topic.parse("socket tcp"), LafcSettings(control_threshold=0.3, seed=2))
    options = LiveOptions(step_size=200, poll_timeout_ms=50)
    job = LiveJob.start(settings, strategy, tmp_path / "state", options)
    seeds = [f"http://{host}:{nginx.port}/index.html" for host in HOSTS]
    kafka_client.produce_to(
        settings, settings.topics.seeds, [encode_record(SeedRequest(u, 1000, "r")) for u in seeds]
    )
    fetchers_kafka = dataclasses.replace(settings, group_id=f"{settings.group_id}-fetchers")

    def fetcher(fetcher_id: str, stop: threading.Event | None = None) -> Fetcher:
        return Fetcher(
            FetcherSettings(
                fetcher_id=fetcher_id,
                delay_s=0.2,  # slow enough that the restarted fetcher rejoins before the crawl ends
                allow_private=True,
                resolve={(h, nginx.port): "127.0.0.1" for h in HOSTS},
                workers=3,
                idle_exit_s=8,
            ),
            fetchers_kafka,
            stop=stop,
        )

    stop_a = threading.Event()
    first_a = _Running(fetcher("fa", stop_a))
    b = _Running(fetcher("fb"))
    wait_for(lambda: first_a.fetcher.stats.events >= 40, "fa to answer 40 entries", 90)
    stop_a.set()  # a graceful stop mid-crawl (SIGTERM in the CLI)
    first_a.thread.join(timeout=60)
    assert not first_a.thread.is_alive()
    second_a = _Running(fetcher("fa"))
    for running in (b, second_a):
        running.thread.join(timeout=180)
        assert not running.thread.is_alive(), "the crawl did not end"
    stats = [r.stats for r in (first_a, b, second_a)]
    assert all(s is not None for s in stats)
    published = sum(s.events for s in stats if s is not None)
    try:
        job.wait_applied(published)
    finally:
        job.close()

    events = [
        decode_record(FetchEvent, v)
        for _, v in kafka_client.read_topic(settings, settings.topics.fetch_events)
    ]
    assert len(events) == published
    # both fetchers worked, and the restarted one too
    assert {e.fetcher_id for e in events} == {"fa", "fb"}
    assert stats[2] is not None and stats[2].events > 0

    # every page downloaded once: nginx's log and the events agree
    pages = [r for r in nginx.requests() if r.path != "/robots.txt"]
    urls = Counter(f"http://{r.host}:{nginx.port}{r.path}" for r in pages)
    assert urls and max(urls.values()) == 1, urls.most_common(3)
    downloads = Counter(e.url for e in events if e.status != 208)
    assert max(downloads.values()) == 1 and set(downloads) == set(urls)

    # every reply request ever written was answered exactly once, by (url, parent, push)
    requests = {
        (entry.url, entry.via, entry.echo[ECHO_PUSH])
        for _, v in kafka_client.read_topic(settings, settings.topics.frontier)
        if v is not None and REPLY_ECHO in (entry := decode_record(FrontierEntry, v)).echo
    }
    answers = Counter((e.url, e.via, e.echo[ECHO_PUSH]) for e in events if REPLY_ECHO in e.echo)
    assert len(requests) > 100
    assert set(answers) == requests
    assert max(answers.values()) == 1
