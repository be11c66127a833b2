"""The fetcher's host queues: best priority first across rested hosts, one request per host
at a time, tombstones, reply requests kept per parent and answered once."""

from __future__ import annotations

import pytest

from frontierflow.connectors.fetcher.queue import HostQueues
from frontierflow.schemas.records import REPLY_ECHO, REVISIT_ECHO, FetchEvent, FrontierEntry
from frontierflow.state.hosts import HostPolicy


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


# --------------------------------------------------------------- the frontier's host rule


def answer(e: FrontierEntry, status: int, at_s: float, **fields: object) -> FetchEvent:
    return FetchEvent(
        url=e.url,
        fetched_at=int(at_s * 1000),
        status=status,
        fetcher_id="f",
        host=e.host,
        via=e.via,
        crawl_id=e.crawl_id,
        cycle=e.cycle,
        **fields,  # type: ignore[arg-type]
    )


def test_a_429_pauses_the_host_and_its_entry_waits_for_the_announced_time() -> None:
    q = HostQueues(delay_s=0.2, spend="time")
    q.offer(entry("http://a/1", 5.0))
    q.offer(entry("http://a/2", 4.0))
    q.offer(entry("http://b/1", 1.0))
    job, _ = q.take(now=100.0)
    assert job is not None and job.entry.url == "http://a/1"
    assert q.retries(job.entry, 429)  # first try of three: asked for again
    event = answer(job.entry, 429, 100.0, retry_after_ms=15_000, will_retry=True)
    q.release(job.entry, 100.0, event, job.partition)
    assert len(q) == 3  # the entry is back, held
    other, _ = q.take(now=100.5)  # only b may be asked
    assert other is not None and other.entry.url == "http://b/1"
    q.release(other.entry, 100.5, answer(other.entry, 200, 100.5))
    nothing, wake = q.take(now=114.9)
    assert nothing is None and wake == 115.0  # the announced end, not the 0.2 s delay
    again, _ = q.take(now=115.0)
    assert again is not None and again.entry.url == "http://a/1"


def test_tries_are_bounded_then_the_answer_stands() -> None:
    q = HostQueues(delay_s=0.0, policy=HostPolicy(max_attempts=3))
    e = entry("http://a/1", 1.0)
    assert q.retries(e, 503) and q.retries(e, -1)
    assert not q.retries(e, 503)  # the third try's answer is the page's
    assert not q.retries(e, 404) and not q.retries(e, 500)  # never deferred


def test_entry_not_before_is_held_until_then() -> None:
    q = HostQueues(delay_s=0.0)
    held = entry("http://a/1", 9.0)
    held.not_before = 50_000
    q.offer(held)
    assert q.take(now=49.0) == (None, 50.0)
    job, _ = q.take(now=50.0)
    assert job is not None and job.entry.url == "http://a/1"


def test_pages_spend_waits_for_a_better_entry_time_spend_does_not() -> None:
    for spend, expected in (("pages", None), ("time", "http://b/1")):
        q = HostQueues(delay_s=1.0, spend=spend)  # type: ignore[arg-type]
        q.offer(entry("http://a/1", 9.0))
        q.offer(entry("http://a/2", 8.0))
        q.offer(entry("http://b/1", 1.0))
        first, _ = q.take(now=0.0)
        assert first is not None and first.entry.url == "http://a/1"
        q.release(first.entry, 0.0, answer(first.entry, 200, 0.0))
        job, wake = q.take(now=0.5)  # a rests until 1.0 with a better entry than b's
        assert (None if job is None else job.entry.url) == expected
        if expected is None:
            assert wake == 1.0


def test_a_paused_host_does_not_hold_back_the_others_under_pages_spend() -> None:
    q = HostQueues(delay_s=0.0)
    q.offer(entry("http://a/1", 9.0))
    q.offer(entry("http://a/2", 9.0))
    q.offer(entry("http://b/1", 1.0))
    job, _ = q.take(now=0.0)
    assert job is not None
    busy = answer(job.entry, 503, 0.0, retry_after_ms=120_000, will_retry=True)
    q.release(job.entry, 0.0, busy, job.partition)
    other, _ = q.take(now=1.0)  # a is paused past the 60 s wait: b's worse entry goes
    assert other is not None and other.entry.url == "http://b/1"


def test_host_and_domain_page_limits_per_cycle() -> None:
    q = HostQueues(delay_s=0.0, policy=HostPolicy(host_page_limit=2, domain_page_limit=3))
    for i in range(3):
        q.offer(entry(f"http://x.example.com/{i}", 1.0))
        q.offer(entry(f"http://y.example.com/{i}", 1.0))
    taken: list[str] = []
    for t in range(10):
        job, _ = q.take(now=float(t))
        if job is None:
            break
        taken.append(job.entry.host)
        q.release(job.entry, float(t), answer(job.entry, 200, float(t)))
    # three pages of example.com in all, at most two of each host
    assert len(taken) == 3 and max(taken.count("x.example.com"), taken.count("y.example.com")) == 2


def test_restore_folds_the_recorded_answers_and_keeps_deferred_pages_to_fetch() -> None:
    q = HostQueues(delay_s=0.0)
    e1, e2 = entry("http://a/1", 2.0), entry("http://a/2", 1.0)
    q.restore(
        [
            answer(e2, 429, 10.0, retry_after_ms=30_000, will_retry=True),
            answer(e1, 200, 5.0),
        ]
    )
    assert q.was_fetched(e1) and not q.was_fetched(e2)
    q.offer(e2)
    assert q.take(now=39.9) == (None, 40.0)  # the pause announced before the restart
    job, _ = q.take(now=40.0)
    assert job is not None and job.entry.url == "http://a/2"


def test_pattern_depth_follows_via_and_is_rebuilt_from_the_recorded_downloads() -> None:
    """A start page is at depth 0, and so is a page reached from a page of another
    pattern; a page whose entry came `via` a page of its own pattern fetched here is one
    deeper. A restarted fetcher gets the same depths back from the `fetched` topic."""
    q = HostQueues(delay_s=0.0)
    root = entry("http://cal/", 1.0)
    day1 = entry("http://cal/day/1", 1.0, via="http://cal/")
    day2 = entry("http://cal/day/2", 1.0, via="http://cal/day/1")
    day4 = entry("http://cal/day/4", 1.0, via="http://cal/day/2")
    from_good = entry("http://cal/day/1", 1.0, via="http://good/day/1")
    assert q.depth(root) == 0 and q.depth(day1) == 0  # "/" and "/day/1": two patterns
    for e in (root, day1, day2):
        q.mark_fetched(e)
    assert (q.depth(day1), q.depth(day2), q.depth(day4)) == (0, 1, 2)
    assert q.depth(from_good) == 0  # another host
    again = HostQueues(delay_s=0.0)
    again.restore([answer(day2, 200, 3.0), answer(root, 200, 1.0), answer(day1, 200, 2.0)])
    assert again.depth(day4) == 2
    counted = HostQueues(delay_s=0.0)  # the depth a download says stands before its via's
    counted.restore([answer(root, 200, 1.0), answer(day2, 200, 2.0, depth=5)])
    assert counted.depth(day4) == 6
    deferred = HostQueues(delay_s=0.0)  # a deferred answer is no fetch: no depth either
    deferred.restore([answer(day1, 200, 1.0), answer(day2, 429, 2.0, will_retry=True)])
    assert deferred.depth(day4) == 1  # day/2 not fetched: day/4 counts from 0 + 1


def test_an_entry_sent_again_by_a_deeper_parent_keeps_its_least_depth() -> None:
    """An article linked from its section (another pattern: depth 0) and then from a
    sibling article (its own pattern, at depth 4) stays at 0: the least over the entries
    offered while it waited."""
    q = HostQueues(delay_s=0.0)
    a1 = entry("http://good/s/1/a1.html", 1.0, via="http://good/s/1/")
    q.offer(entry("http://good/s/1/a2.html", 1.0, via="http://good/s/1/"))
    q._remember_depth("c", a1.url, 4)
    a2_from_a1 = entry("http://good/s/1/a2.html", 2.0, via="http://good/s/1/a1.html")
    assert q.depth(a2_from_a1) == 0  # alone: a1 (4) + 1 would be 5
    q.offer(a2_from_a1)
    job, _ = q.take(now=0.0)
    assert job is not None and job.entry is a2_from_a1 and q.depth(job.entry) == 0


def test_max_lead_waits_for_the_frontiers_word_on_the_last_download() -> None:
    """With max_lead 1 the next entry waits until the frontier has read the last answer
    (its URL's tombstone) or the lead time-out passed; a deferred answer does not count."""
    q = HostQueues(delay_s=0.0, max_lead=1, lead_timeout_s=10.0)
    for url, p in (("http://a/1", 3.0), ("http://b/1", 2.0), ("http://c/1", 1.0)):
        q.offer(entry(url, p))
    job, _ = q.take(now=0.0)
    assert job is not None and job.entry.url == "http://a/1"
    assert q.take(now=0.0) == (None, None)  # one in flight: only its release frees a place
    q.release(job.entry, 1.0, answer(job.entry, 200, 1.0))
    assert q.take(now=1.0) == (None, 11.0)  # awaiting the frontier's word until 11 s
    q.remove("http://a/1")  # the tombstone: the job read the answer
    job, _ = q.take(now=1.5)
    assert job is not None and job.entry.url == "http://b/1"
    q.release(job.entry, 2.0, answer(job.entry, 200, 2.0))
    job, _ = q.take(now=12.0)  # no tombstone came: the time-out frees the place
    assert job is not None and job.entry.url == "http://c/1"
    q.release(job.entry, 12.5, answer(job.entry, 429, 12.5, will_retry=True))
    assert q.take(now=12.5)[0] is None  # nothing else to take; but not blocked by the lead
    assert q._lead_full(12.5) == (False, None)
    with pytest.raises(ValueError):
        HostQueues(delay_s=0.0, max_lead=0)


def _revisit(e: FrontierEntry, due_ms: int) -> FrontierEntry:
    """The job's entry asking for `e`'s page again from `due_ms` (`--revisit`)."""
    return FrontierEntry(
        url=e.url, host=e.host, priority=-1e16, strategy="t", crawl_id=e.crawl_id,
        cycle=e.cycle, via=None, emitted_at=0, echo={REVISIT_ECHO: str(due_ms)},
        not_before=due_ms,
    )  # fmt: skip


def test_a_revisit_entry_downloads_a_fetched_page_again_once_per_due_time() -> None:
    q = HostQueues(delay_s=0.0)
    page = entry("http://a/1", 1.0)
    q.offer(page)
    job, _ = q.take(now=0.0)
    assert job is not None
    q.release(job.entry, 1.0, answer(job.entry, 200, 1.0))
    assert not q.offer(page)  # a plain entry for a page fetched in its cycle: dropped
    first = _revisit(page, 5_000)
    assert q.offer(first)
    assert q.take(now=4.0) == (None, 5.0)  # held until its not_before
    job, _ = q.take(now=5.0)
    assert job is not None and job.download and job.entry.echo[REVISIT_ECHO] == "5000"
    event = answer(job.entry, 200, 5.5, echo=job.entry.echo)
    q.release(job.entry, 5.5, event)
    assert not q.offer(first)  # that revisit was downloaded: read again, it is dropped
    assert q.offer(_revisit(page, 9_000))
    # a fetcher taking the host over learns the revisits done from the `fetched` topic
    other = HostQueues(delay_s=0.0)
    other.restore([answer(page, 200, 1.0), event])
    assert not other.offer(first) and other.offer(_revisit(page, 9_000))


def test_a_revisit_entry_is_the_frontiers_word_on_the_download_under_max_lead() -> None:
    """With revisits the job answers a download with the page's next revisit entry rather
    than a tombstone: that entry frees the place the download held."""
    q = HostQueues(delay_s=0.0, max_lead=1, lead_timeout_s=10.0)
    page, other = entry("http://a/1", 2.0), entry("http://b/1", 1.0)
    q.offer(page)
    q.offer(other)
    job, _ = q.take(now=0.0)
    assert job is not None and job.entry.url == "http://a/1"
    q.release(job.entry, 1.0, answer(job.entry, 200, 1.0))
    assert q.take(now=1.0) == (None, 11.0)
    q.offer(_revisit(page, 60_000))
    job, _ = q.take(now=1.5)
    assert job is not None and job.entry.url == "http://b/1"
