"""Learned revisits live: `frontierflow run --strategy bfs --revisit learned:2m` on a real
broker, the loop closed by a fetcher that serves the frontier topic from the synthetic news
site (the fleet tests' news-site fetcher), the job killed with SIGKILL mid-crawl and started
again — and its state (revisit records per page and per host, the strategy's states, the
pages fetched) ends exactly as the in-process closed loop's (`crawl_news_site`).

The test's fetcher does what the reference fetcher does, in simulated time: it keeps the
latest entry per URL from the topic (a restarted job re-sends its uncommitted step's
records: identical upserts, read once), serves the best entry whose `not_before` has
passed or waits for the earliest, and asks for the next only once the job has applied the
last answer (its committed offset on fetch-events) and the frontier topic is read to its
end, so every choice is made on the frontier the in-process loop had."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from job_process import JobProcess
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from news_recording import write_recording

from frontierflow.connectors.kafka import ensure_topics
from frontierflow.pipelines.evaluation.forager_engine import news_fetch_event
from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup, build_site
from frontierflow.pipelines.evaluation.live_revisits import DueFrontier, crawl_news_site
from frontierflow.pipelines.evaluation.news_site import HOME
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.codecs import decode_record, encode_record
from frontierflow.schemas.records import REVISIT_ECHO, FrontierEntry, Removal, SeedRequest
from frontierflow.state.revisit_schedule import REVISITS_FAMILY, parse_revisit
from frontierflow.state.storage.rocksdb import RocksDBStore

pytestmark = pytest.mark.kafka

DEADLINE_S = 240
POLICY = "learned:20s"
FAMILIES = ("bfs", "crawled", REVISITS_FAMILY)
JOB = ("--strategy", "bfs", "--budget", "1000", "--revisit", POLICY)


class _Frontier:
    """The frontier topic as the test's fetcher reads it (module docstring)."""

    def __init__(self, consumer: KafkaConsumer, topic: str) -> None:
        self.consumer = consumer
        self.partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
        consumer.assign(self.partitions)
        consumer.seek_to_beginning(*self.partitions)
        self.due = DueFrontier()
        self.read: set[tuple[bytes, bytes | None]] = set()

    def poll(self, timeout_ms: int) -> None:
        """Take what the topic has (waiting up to `timeout_ms` for something)."""
        for records in self.consumer.poll(timeout_ms=timeout_ms).values():
            for rec in records:
                if (rec.key, rec.value) in self.read:
                    continue  # a re-sent record of a step redone after the kill
                self.read.add((rec.key, rec.value))
                if rec.value is None:
                    self.due.apply(Removal(rec.key.decode()))
                else:
                    self.due.apply(decode_record(FrontierEntry, rec.value))

    def read_to_end(self, deadline: float) -> None:
        ends = self.consumer.end_offsets(self.partitions)
        while any(self.consumer.position(p) < ends[p] for p in self.partitions):
            assert time.monotonic() < deadline, "the frontier topic did not come to its end"
            self.poll(100)


def _applied(admin: KafkaAdminClient, group: str, topic: str) -> int:
    """The fetch-events offset the job has applied (committed for the group after each
    step: `commit_for_monitoring`)."""
    offsets = admin.list_group_offsets(group).get(group, {})
    meta = offsets.get(TopicPartition(topic, 0))
    return -1 if meta is None else meta.offset


def test_live_learned_revisits_survive_kill_9_and_end_as_the_closed_loop(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path
) -> None:
    write_recording(tmp_path)
    setup = ForagerSetup(news=tmp_path, start="2022-03-01T06:00:00Z", days=0.1)
    site = build_site(setup)
    expected = crawl_news_site(
        site, build_strategy("bfs", budget=1000), parse_revisit(POLICY),
        download_ms=setup.download_ms,
    )  # fmt: skip
    assert sum(REVISIT_ECHO in e.echo for e in expected.events) > 40

    settings = kafka_client.settings(kafka_broker.bootstrap)
    ensure_topics(settings)
    topics = settings.topics
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, acks="all")
    seed = SeedRequest(HOME, site.start_ms, "news", 0)
    producer.send(topics.seeds, key=HOME.encode(), value=encode_record(seed))
    producer.flush()
    job = JobProcess(settings, tmp_path / "state", *JOB)
    job.start()
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap)
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20
    )
    frontier = _Frontier(consumer, topics.frontier)
    t, served, kill_at, killed = site.start_ms, 0, len(expected.events) // 2, False
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not len(frontier.due):  # the seed's step
            assert time.monotonic() < deadline, "no seed entry"
            job.check_running()
            frontier.poll(100)
        while True:
            assert time.monotonic() < deadline, f"served {served} of {len(expected.events)}"
            job.check_running()
            entry = frontier.due.pop(t)
            if entry is None:
                wake = frontier.due.next_due()
                assert wake is not None
                t = max(t, wake)
                continue
            if t >= site.end_ms:
                break
            event = news_fetch_event(site, entry, t, setup.download_ms, "news")
            assert event == expected.events[served], f"the fetch {served} differs"
            t = event.fetched_at
            producer.send(topics.fetch_events, key=event.host.encode(), value=encode_record(event))
            producer.flush()
            served += 1
            if served == kill_at and not killed:
                job.kill_and_restart()
                killed = True
            while _applied(admin, settings.group_id, topics.fetch_events) < served:
                assert time.monotonic() < deadline, f"the job did not apply fetch {served}"
                job.check_running()
                frontier.poll(20)
            frontier.read_to_end(deadline)
    finally:
        job.stop()
        consumer.close()
        producer.close()
        admin.close()
    job.finish()  # whatever the last run left uncommitted, a run to the end of the input
    assert killed and served == len(expected.events)
    with RocksDBStore(job.state_dir, FAMILIES) as store:
        for family in FAMILIES:
            assert dict(store.items(family)) == dict(expected.store.items(family)), family
