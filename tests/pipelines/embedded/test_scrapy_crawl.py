"""Scrapy on the frontier, for real: `scrapy crawl` of the example project
(examples/scrapy) in a subprocess, its scheduler reading the frontier topic that
`frontierflow run` (a subprocess too, IECA or LAFC) writes on a real broker, nginx serving a
small linked site on 127.0.0.1 (three virtual hosts, one with a robots.txt).

Read back from nginx's access log and the topics: every page Scrapy fetched was asked for by
a frontier entry, none twice, the crawl stops at the scheduler's budget, the links the
spider tried to follow itself were dropped, robots.txt refusals became FetchEvents with the
fetcher's negative status. Then two Scrapy processes on one four-partition frontier (hosts
split by partition, as the reference fetchers' test sets up), one on each Kafka client
library, fetch no page twice."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hostile_web import HostileWeb
from kafka import KafkaAdminClient
from kafka.errors import KafkaError
from polling import wait_for

from frontierflow.connectors.fetcher.outcomes import ROBOTS_DISALLOWED
from frontierflow.connectors.kafka import KafkaSettings, ensure_topics
from frontierflow.pipelines.cli import main
from frontierflow.schemas.codecs import decode_record
from frontierflow.schemas.records import FetchEvent, FrontierEntry

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[3]
PROJECT = REPO / "examples" / "scrapy"
HOSTS = ("a.test", "b.test", "c.test")
SCRAPY_TIMEOUT_S = 150


def _job(settings: KafkaSettings, state: Path, strategy: list[str]) -> subprocess.Popen[str]:
    """`frontierflow run` on the test's topics, in a process of its own."""
    t = settings.topics
    args = [sys.executable, "-m", "frontierflow.pipelines.cli", "run",
            "--bootstrap-servers", settings.bootstrap_servers, "--state-dir", str(state),
            "--group-id", settings.group_id, "--step-size", "100", "--speed-window-ms", "1000",
            "--topic-fetch-events", t.fetch_events, "--topic-frontier", t.frontier,
            "--topic-fetcher-control", t.fetcher_control, "--topic-dead-letter", t.dead_letter,
            "--topic-seeds", t.seeds, "--partitions", str(settings.partitions),
            *strategy]  # fmt: skip
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _stop(job: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM (the job's graceful stop); its exit code and log."""
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=60)
    return job.returncode, err[-3000:]


def _scrapy(
    settings: KafkaSettings,
    port: int,
    fetcher_id: str,
    *extra: str,
    hosts: tuple[str, ...] = HOSTS,
) -> subprocess.Popen[str]:
    """`scrapy crawl pages` of the example project, its spider following links itself."""
    t = settings.topics
    topics = {"fetch_events": t.fetch_events, "frontier": t.frontier,
              "fetcher_control": t.fetcher_control, "dead_letter": t.dead_letter,
              "seeds": t.seeds, "fetched": t.fetched}  # fmt: skip
    resolve = ",".join(f"{h}:{port}:127.0.0.1" for h in hosts)
    args = [sys.executable, "-m", "scrapy", "crawl", "pages", "-a", "follow=1",
            "-s", f"FRONTIERFLOW_BOOTSTRAP_SERVERS={settings.bootstrap_servers}",
            "-s", f"FRONTIERFLOW_FETCHER_ID={fetcher_id}",
            "-s", f"FRONTIERFLOW_GROUP_ID={settings.group_id}-scrapy",
            "-s", f"FRONTIERFLOW_TOPICS={json.dumps(topics)}",
            "-s", f"FRONTIERFLOW_RESOLVE={resolve}",
            "-s", "DOWNLOAD_DELAY=0.02", "-s", "CONCURRENT_REQUESTS=4",
            "-s", "LOG_LEVEL=INFO", *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    return subprocess.Popen(
        args, cwd=PROJECT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )


def _finish(crawl: subprocess.Popen[str]) -> dict[str, int]:
    """Wait for the crawl; its `frontierflow/*` stats and finish reason from the log."""
    _, err = crawl.communicate(timeout=SCRAPY_TIMEOUT_S)
    assert crawl.returncode == 0, err[-4000:]
    assert "'finish_reason': 'finished'" in err, err[-4000:]
    return {k: int(v) for k, v in re.findall(r"'frontierflow/([a-z_/-]+)': (\d+)", err)}


def _wait_for_members(settings: KafkaSettings, group: str, members: int) -> None:
    """Until `members` consumers share `group` with their partitions assigned (polled with a
    deadline), so that the hosts are split before the crawl starts."""
    admin = KafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)

    def stable() -> bool:
        try:
            found = admin.describe_groups([group]).get(group) or {}
        except KafkaError:  # no coordinator before the first member joins
            return False
        return found.get("group_state") == "Stable" and len(found.get("members") or ()) == members

    try:
        wait_for(stable, f"group {group} to have {members} members", 60, interval_s=0.1)
    finally:
        admin.close()


def _seed(settings: KafkaSettings, port: int, crawl_id: str) -> None:
    seeds = [f"http://{host}:{port}/index.html" for host in HOSTS]
    args = ["seed", "--bootstrap-servers", settings.bootstrap_servers,
            "--topic-seeds", settings.topics.seeds, "--crawl-id", crawl_id, *seeds]  # fmt: skip
    assert main(args) == 0


def _events(kafka_client: Any, settings: KafkaSettings) -> list[FetchEvent]:
    return [
        decode_record(FetchEvent, v)
        for _, v in kafka_client.read_topic(settings, settings.topics.fetch_events)
    ]


def _entries(kafka_client: Any, settings: KafkaSettings) -> list[FrontierEntry]:
    """Every frontier entry ever written (the topic is read before compaction)."""
    return [
        decode_record(FrontierEntry, v)
        for _, v in kafka_client.read_topic(settings, settings.topics.frontier)
        if v is not None
    ]


def _topics(kafka_client: Any, bootstrap: str, partitions: int = 1) -> KafkaSettings:
    settings = kafka_client.settings(bootstrap)  # topics of its own, `fetched` too
    return dataclasses.replace(settings, partitions=partitions)


@pytest.mark.parametrize(
    ("strategy", "budget"),
    [
        (["--strategy", "ieca", "--budget", "1000"], 45),
        (["--strategy", "lafc", "--topic", "socket tcp", "--lafc-c", "0.3", "--seed", "1"], 45),
    ],
    ids=["ieca", "lafc"],
)
def test_scrapy_crawls_what_the_frontier_asks_once_and_stops_at_its_budget(
    strategy: list[str],
    budget: int,
    kafka_broker: Any,
    kafka_client: Any,
    nginx_sites: Any,
    linked_site: Any,
    tmp_path: Path,
) -> None:
    sites = linked_site(tmp_path / "site", HOSTS, 40, robots_host="c.test")
    (sites["c.test"] / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    nginx = nginx_sites(sites)
    linked_site.fill_port(sites, nginx.port)
    settings = _topics(kafka_client, kafka_broker.bootstrap)
    ensure_topics(settings)
    job = _job(settings, tmp_path / "state", strategy)
    try:
        _seed(settings, nginx.port, "scrapy")
        crawl = _scrapy(
            settings,
            nginx.port,
            "s1",
            "-s", f"FRONTIERFLOW_MAX_PAGES={budget}",
            "-s", "FRONTIERFLOW_IDLE_EXIT=30",
        )  # fmt: skip
        stats = _finish(crawl)
    finally:
        stopped = _stop(job)
    assert stopped[0] == 0, stopped[1]

    events = _events(kafka_client, settings)
    downloads = [e for e in events if e.status != 208]
    # the budget holds: exactly `budget` entries handed to Scrapy, each answered once
    assert stats["downloads"] == len(downloads) == budget, stats
    assert stats["events"] == len(events)
    assert {e.fetcher_id for e in events} == {"s1"} and {e.crawl_id for e in events} == {"scrapy"}
    assert Counter((e.url, e.via) for e in events).most_common(1)[0][1] == 1

    # nginx saw each page once, and only pages the frontier asked for
    requests = nginx.requests()
    pages = [r for r in requests if r.path != "/robots.txt"]
    urls = Counter(f"http://{r.host}:{nginx.port}{r.path}" for r in pages)
    assert urls and max(urls.values()) == 1, urls.most_common(3)
    entries = _entries(kafka_client, settings)
    assert set(urls) <= {entry.url for entry in entries}
    assert len({entry.url for entry in entries}) > budget  # the budget, not the site, ended it
    assert set(urls) == {e.url for e in downloads if e.status > 0}

    # the spider's own link following never reached the downloader
    assert stats["spider_requests_dropped"] > 0

    # the events carry what the reference fetcher puts in them
    ok = [e for e in downloads if e.status == 200]
    assert ok and all(e.outlinks and e.terms and e.bytes and e.content_hash for e in ok)
    assert all(e.fetch_ms is not None and e.fetch_ms >= 0 for e in ok)
    seeds = {f"http://{h}:{nginx.port}/index.html" for h in HOSTS}
    assert {e.url for e in events if e.via is None} <= seeds
    # each event answers an entry: its URL, parent and echo as the entry gave them
    asked = {(x.url, x.via, tuple(sorted(x.echo.items()))) for x in entries}
    assert {(e.url, e.via, tuple(sorted(e.echo.items()))) for e in events} <= asked
    assert any(e.echo for e in events)
    # robots.txt: /private/ never requested; its entries answered with a negative status
    assert not [r for r in requests if r.path.startswith("/private/")]
    # (a reply request for it after that is answered 208, as for any page fetched)
    if any("/private/" in e.url for e in downloads):
        assert {e.status for e in downloads if "/private/" in e.url} == {ROBOTS_DISALLOWED}


def test_two_scrapy_processes_on_one_frontier_fetch_no_page_twice(
    kafka_broker: Any, kafka_client: Any, nginx_sites: Any, linked_site: Any, tmp_path: Path
) -> None:
    sites = linked_site(tmp_path / "site", HOSTS, 25, seed=11)
    nginx = nginx_sites(sites)
    linked_site.fill_port(sites, nginx.port)
    settings = _topics(kafka_client, kafka_broker.bootstrap, partitions=4)
    ensure_topics(settings)
    # a fixed controller: every window's ScalingDecision says 2 threads for each fetcher
    fixed = ["--speed-controller", "fixed-2", "--speed-window-ms", "500"]
    job = _job(settings, tmp_path / "state", ["--strategy", "ieca", "--budget", "1000", *fixed])
    try:
        # one on each Kafka client library: both libraries' members share one group
        idle = ("-s", "FRONTIERFLOW_IDLE_EXIT=8")
        crawls = [
            _scrapy(settings, nginx.port, fid, *idle, "-s", f"FRONTIERFLOW_KAFKA_CLIENT={library}")
            for fid, library in (("s1", "kafka-python"), ("s2", "confluent"))
        ]
        _wait_for_members(settings, f"{settings.group_id}-scrapy", 2)
        _seed(settings, nginx.port, "two")
        stats = [_finish(c) for c in crawls]
    finally:
        stopped = _stop(job)
    assert stopped[0] == 0, stopped[1]

    events = _events(kafka_client, settings)
    assert len(events) == sum(s.get("events", 0) for s in stats), stats
    assert {e.fetcher_id for e in events} == {"s1", "s2"}  # both fetched
    pages = [r for r in nginx.requests() if r.path != "/robots.txt"]
    urls = Counter(f"http://{r.host}:{nginx.port}{r.path}" for r in pages)
    assert urls and max(urls.values()) == 1, urls.most_common(3)
    downloads = Counter(e.url for e in events if e.status != 208)
    assert max(downloads.values()) == 1
    assert set(urls) == {e.url for e in events if e.status > 0 and e.status != 208}
    # the decisions reached the running crawlers and set their concurrency (4 at start)
    decided = [st for st in stats if st.get("decisions")]
    assert decided, stats
    assert all(st["concurrency"] == 2 and st["concurrency_changes"] == 1 for st in decided)
    # the whole site was crawled: 25 pages per host
    assert sum(1 for u in urls if not u.endswith("/missing.html")) == 25 * len(HOSTS)


def test_scrapy_on_a_web_that_pushes_back(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path
) -> None:
    """The hostile web (tests/hostile_web.py), crawled by Scrapy with its own
    RetryMiddleware on (429 and 503 are in its default retry codes), in two halves with the
    job and Scrapy both stopped and started again between them: no request reaches the busy
    host inside a pause it announced, Scrapy's retries and the restart included."""
    settings = _topics(kafka_client, kafka_broker.bootstrap)
    ensure_topics(settings)
    state = tmp_path / "state"
    halves: list[dict[str, int]] = []
    with HostileWeb(busy_burst=3, busy_window_s=4.0, busy_retry_after_s=2, slow_pages=4) as web:
        for half in range(2):
            job = _job(settings, state, ["--strategy", "bfs", "--budget", "1000"])
            try:
                if half == 0:
                    seed = ["seed", "--bootstrap-servers", settings.bootstrap_servers,
                            "--topic-seeds", settings.topics.seeds, "--crawl-id", "hostile",
                            *web.seeds()]  # fmt: skip
                    assert main(seed) == 0
                crawl = _scrapy(
                    settings,
                    web.port,
                    "s1",
                    "-s",
                    "FRONTIERFLOW_MAX_PAGES=60",
                    "-s",
                    "FRONTIERFLOW_IDLE_EXIT=10",
                    hosts=web.hosts,
                )
                halves.append(_finish(crawl))
            finally:
                code, log = _stop(job)
            assert code == 0, log
        pauses = web.announced_pauses("busy.test")
        inside = web.requests_inside_pauses("busy.test")
        busy_pages = web.pages_served("busy.test")
        calendar = web.pages_served("calendar.test")
    stats = {k: halves[0].get(k, 0) + halves[1].get(k, 0) for k in {*halves[0], *halves[1]}}
    assert pauses, stats  # the busy host pushed back
    assert inside == [], (inside, pauses)
    assert stats.get("pushed_back", 0) >= 1, stats
    assert calendar <= 12, calendar  # breadth-first: the trap's deep days last (10 % of 120)
    assert busy_pages > 3, busy_pages  # more than one burst: crawled on after a pause
