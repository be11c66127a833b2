"""Foragers live: `frontierflow run --strategy forager-wl` on a real broker, the loop closed
by a fetcher that serves the frontier topic from the synthetic news site, the job killed
with SIGKILL mid-crawl and restarted — and the fleet ends exactly as the in-process closed
loop (`run_fleet_on_engine`) leaves it.

The test's fetcher does what the reference fetcher does with fleet entries, in simulated
time: it serves entries in the order they reach the (single-host, so single-partition)
frontier topic, downloads each (url, cycle, via) once (a restarted job re-sends the entries
of its uncommitted steps: identical upserts), drops an entry a tombstone withdraws, and
stops at the first step the fleet begins after the run's end."""

from __future__ import annotations

import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from job_process import JobProcess
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from news_recording import write_recording

from frontierflow.connectors.kafka import ensure_topics
from frontierflow.pipelines.evaluation.forager_engine import news_fetch_event, run_fleet_on_engine
from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup, build_site
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.strategies.foragers import ECHO_ROLE
from frontierflow.schemas.codecs import decode_record, encode_record
from frontierflow.schemas.records import FrontierEntry, SeedRequest
from frontierflow.state.fleet import fleet_key
from frontierflow.state.forager import Variant
from frontierflow.state.storage.rocksdb import RocksDBStore

pytestmark = pytest.mark.kafka

DEADLINE_S = 240
FLEET = ("--strategy", "forager-wl", "--sections", "Europe", "--seed", "3")


def test_live_fleet_survives_kill_9_and_ends_as_the_closed_loop(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path
) -> None:
    write_recording(tmp_path)
    setup = ForagerSetup(news=tmp_path, start="2022-03-01T06:00:00Z", days=0.02, topic=("Europe",))
    site = build_site(setup)
    cli_strategy = build_strategy("forager-wl", budget=1, seed=3, sections=("Europe",))
    expected = run_fleet_on_engine(site, setup, Variant.WL, 3, strategy=cli_strategy)

    settings = kafka_client.settings(kafka_broker.bootstrap)
    ensure_topics(settings)
    topics = settings.topics
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    for url in site.seeds(setup.params.start_list):  # before the job starts: one seeds step
        seed = SeedRequest(url, site.start_ms, "news", 0)
        producer.send(topics.seeds, key=url.encode(), value=encode_record(seed))
    producer.flush()

    state_dir = tmp_path / "state"
    job = JobProcess(settings, state_dir, *FLEET)
    job.start()
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20
    )
    partitions = [
        TopicPartition(topics.frontier, p) for p in consumer.partitions_for_topic(topics.frontier)
    ]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    queue: deque[tuple[bytes, FrontierEntry]] = deque()
    seen: set[tuple[int, str, str | None]] = set()
    t, served, kill_at, killed = site.start_ms, 0, expected.events // 2, False
    deadline = time.monotonic() + DEADLINE_S
    try:
        while True:
            assert time.monotonic() < deadline, f"served {served} of {expected.events}"
            job.check_running()
            for records in consumer.poll(timeout_ms=100).values():
                for rec in records:
                    if rec.value is None:  # withdrawn
                        queue = deque(q for q in queue if q[0] != rec.key)
                        continue
                    entry = decode_record(FrontierEntry, rec.value)
                    k = (entry.cycle, entry.url, entry.via)
                    if k not in seen:
                        seen.add(k)
                        queue.append((rec.key, entry))
            if not queue:
                continue
            _, entry = queue.popleft()
            if t >= site.end_ms and entry.echo.get(ECHO_ROLE) == "visit":
                break
            event = news_fetch_event(site, entry, t, setup.download_ms, "news")
            t = event.fetched_at
            producer.send(topics.fetch_events, key=event.host.encode(), value=encode_record(event))
            producer.flush()
            served += 1
            if served == kill_at and not killed:
                job.kill_and_restart()
                killed = True
    finally:
        job.stop()
        consumer.close()
        producer.close()
    job.finish()  # whatever the last run left uncommitted, a run to the end of the input
    assert killed and served == expected.events
    with RocksDBStore(state_dir, ("fleet", "crawled", "meta")) as store:
        live = store.get("fleet", fleet_key("news").encode())
    assert live == expected.state
