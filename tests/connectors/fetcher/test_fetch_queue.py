"""The fetcher's host queues: best priority first across rested hosts, one request per host
at a time, tombstones, reply requests kept per parent and answered once."""

from __future__ import annotations

from frontierflow.connectors.fetcher.queue import HostQueues
from frontierflow.schemas.records import REPLY_ECHO, FrontierEntry


def entry(url: str, priority: float, via: str | None = None, reply: bool = False) -> FrontierEntry:
    host = url.split("/")[2]
    return FrontierEntry(
        url=url,
        host=host,
        priority=priority,
        strategy="t",
        crawl_id="c",
        cycle=0,
        via=via,
        emitted_at=0,
        echo={REPLY_ECHO: "1"} if reply else {},
    )


def test_best_priority_of_rested_hosts_and_one_request_per_host() -> None:
    q = HostQueues(delay_s=1.0)
    q.offer(entry("http://a/1", 5.0))
    q.offer(entry("http://a/2", 9.0))
    q.offer(entry("http://b/1", 7.0))
    job, _ = q.take(now=0.0)
    assert job is not None and job.entry.url == "http://a/2" and job.download
    job2, _ = q.take(now=0.0)  # host a is busy: b's best
    assert job2 is not None and job2.entry.url == "http://b/1"
    assert q.take(now=0.0) == (None, None)  # both busy, nothing else
    q.release(job.entry, now=10.0)
    nothing, wake = q.take(now=10.5)  # a rests until 11.0
    assert nothing is None and wake == 11.0
    job3, _ = q.take(now=11.0)
    assert job3 is not None and job3.entry.url == "http://a/1"


def test_latest_entry_wins_and_tombstone_removes() -> None:
    q = HostQueues(delay_s=0.0)
    q.offer(entry("http://a/1", 1.0))
    q.offer(entry("http://a/2", 2.0))
    q.offer(entry("http://a/1", 3.0))  # replaces: now best
    q.remove("http://a/2")
    assert len(q) == 1
    job, _ = q.take(now=0.0)
    assert job is not None and job.entry.priority == 3.0
    q.release(job.entry, 0.0)
    assert q.take(now=0.0) == (None, None)


def test_reply_requests_kept_per_parent_survive_tombstones_and_answer_without_download() -> None:
    q = HostQueues(delay_s=0.0)
    first = entry("http://a/x", 2.0, via="http://a/p1", reply=True)
    second = entry("http://a/x", 1.0, via="http://a/p2", reply=True)
    q.offer(first)
    q.offer(second)
    q.remove("http://a/x")  # the tombstone of the URL leaves reply requests alone
    assert len(q) == 2
    job, _ = q.take(now=0.0)
    assert job is not None and job.entry.via == "http://a/p1" and job.download
    q.mark_fetched(job.entry)
    q.release(job.entry, now=0.0)
    q.offer(entry("http://a/x", 9.0))  # a plain entry for a fetched page is dropped
    answer, _ = q.take(now=0.0)
    assert answer is not None and answer.entry.via == "http://a/p2" and not answer.download
    assert q.take(now=0.0) == (None, None)


def test_crawl_delay_never_below_the_fetchers_and_revoked_partitions_forgotten() -> None:
    q = HostQueues(delay_s=0.5)
    q.offer(entry("http://a/1", 1.0), partition=0)
    q.offer(entry("http://a/2", 1.0), partition=1)
    q.set_host_delay("a", 0.1)  # a shorter Crawl-delay does not shorten ours
    assert q.drop_partitions({1}) == 1
    job, _ = q.take(now=0.0)
    assert job is not None and job.entry.url == "http://a/1"
    q.release(job.entry, now=1.0)
    q.offer(entry("http://a/3", 1.0))
    assert q.take(now=1.4)[0] is None
    q.set_host_delay("a", 2.0)
    assert q.take(now=1.5)[0] is not None  # the new delay applies from the next release
