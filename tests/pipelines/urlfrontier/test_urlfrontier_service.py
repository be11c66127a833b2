"""The URL Frontier service through a real gRPC channel, every rpc, from our own stubs.

The server runs in-process on 127.0.0.1 over a RocksDB store in tmp_path with a clock the
test moves, so locks, delays, blocks and revisits are checked without waiting. Expected
priorities are worked out by hand: OPIC seeds hold cash 1 and a fetched page splits its
cash evenly over its outlinks; IECA's seeds sit at distance 0.3 and a new child of a page
with O outlinks at (1 − δ_t)·0.3 + log10 O (Golshani & ZarehBidoki 2012, eq. 13;
δ_t = 0.35 before the first k pages).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from frontierflow.connectors.urlfrontier import urlfrontier_pb2 as pb
from frontierflow.connectors.urlfrontier import urlfrontier_pb2_grpc as pb_grpc
from frontierflow.pipelines.embedded.hosts import host_store_key
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.urlfrontier.frontier import Frontier, FrontierSettings
from frontierflow.pipelines.urlfrontier.service import MAX_MESSAGE_BYTES, serve
from frontierflow.schemas.records import FrontierEntry
from frontierflow.state.hosts import decode_host_state, group_key
from frontierflow.state.revisit_schedule import parse_revisit
from frontierflow.state.storage.rocksdb import RocksDBStore
from frontierflow.state.storage.store import META_FAMILY
from frontierflow.state.urlfrontier import (
    QUEUES_FAMILY,
    URLS_FAMILY,
    QueueSettings,
    UrlRecord,
    crawl_key,
    decode_url_record,
    encode_queue_settings,
    encode_url_record,
)

T0 = 1_700_000_000.0


@dataclass
class Clock:
    now: float = T0

    def __call__(self) -> float:
        return self.now


@dataclass
class Served:
    stub: pb_grpc.URLFrontierStub
    frontier: Frontier
    clock: Clock
    channel: grpc.Channel
    port: int


def _start(tmp_path: Path, strategy: str, revisit: str = "none") -> Iterator[Served]:
    strat = build_strategy(strategy, budget=1000)
    policy = parse_revisit(revisit)
    store = RocksDBStore(tmp_path / "state", Frontier.families_for(strat, policy is not None))
    clock = Clock()
    settings = FrontierSettings(default_lock_s=30, outlink_timeout_s=60, revisit=policy)
    frontier = Frontier(strat, store, settings, clock)
    server, port, stop = serve(frontier, "127.0.0.1:0", flush_every_s=3600)
    channel = grpc.insecure_channel(
        f"127.0.0.1:{port}", options=[("grpc.max_send_message_length", 64 * 1024 * 1024)]
    )
    try:
        yield Served(pb_grpc.URLFrontierStub(channel), frontier, clock, channel, port)
    finally:
        channel.close()
        stop.set()
        server.stop(None).wait(10)
        store.close()


@pytest.fixture
def opic(tmp_path: Path) -> Iterator[Served]:
    yield from _start(tmp_path, "opic")


@pytest.fixture
def ieca(tmp_path: Path) -> Iterator[Served]:
    yield from _start(tmp_path, "ieca")


@pytest.fixture
def revisited(tmp_path: Path) -> Iterator[Served]:
    """OPIC with every page asked for again 10 minutes after each report."""
    yield from _start(tmp_path, "opic", "fixed:10m")


def info(url: str, crawl: str = "", key: str = "", **meta: list[str]) -> pb.URLInfo:
    return pb.URLInfo(
        url=url,
        key=key,
        crawlID=crawl,
        metadata={k.replace("_", "."): pb.StringList(values=v) for k, v in meta.items()},
    )


def discovered(url: str, parent: str | None = None, **kw: str) -> pb.URLItem:
    meta = {"url_path": [parent]} if parent else {}
    return pb.URLItem(discovered=pb.DiscoveredURLItem(info=info(url, **kw, **meta)))


def known(url: str, refetch: int = 0, crawl: str = "", **meta: list[str]) -> pb.URLItem:
    return pb.URLItem(
        known=pb.KnownURLItem(info=info(url, crawl, **meta), refetchable_from_date=refetch)
    )


def put(s: Served, *items: pb.URLItem) -> list[int]:
    return [ack.status for ack in s.stub.PutURLs(iter(items))]


def get(
    s: Served,
    per_queue: int = 0,
    queues: int = 0,
    key: str = "",
    crawl: str = "",
    any_crawl: bool = False,
    lock: int = 0,
) -> list[str]:
    params = pb.GetParams(
        max_urls_per_queue=per_queue, max_queues=queues, key=key, delay_requestable=lock
    )
    if any_crawl:
        params.anyCrawlID.SetInParent()
    else:
        params.crawlID = crawl
    return [u.url for u in s.stub.GetURLs(params)]


def priority(s: Served, url: str, crawl: str = "DEFAULT") -> float | None:
    record = s.frontier.url_record(crawl, url)
    assert record is not None, url
    return record.priority


A = "https://a.example/"
B = "https://b.example/"
OK, SKIPPED = pb.AckMessage.OK, pb.AckMessage.SKIPPED


def test_a_page_report_turns_its_outlinks_into_links(opic: Served) -> None:
    """Seeds are served, their outlinks wait for the parent's report, then take OPIC's
    cash share: 1 / 2 outlinks = 0.5 each."""
    assert put(opic, discovered(A), discovered(B)) == [OK, OK]
    assert priority(opic, A) == 1.0
    assert sorted(get(opic)) == [A, B]
    children = [A + "x", A + "y"]
    assert put(opic, *(discovered(c, parent=A) for c in children)) == [OK, OK]
    assert [priority(opic, c) for c in children] == [None, None]
    assert get(opic) == []  # children wait for A's report; A and B are locked
    assert put(opic, known(A)) == [OK]
    assert [priority(opic, c) for c in children] == [0.5, 0.5]
    assert sorted(get(opic)) == children
    assert opic.frontier.engine.crawled("DEFAULT") == 1


def test_ieca_priority_of_a_child_is_eq_13(ieca: Served) -> None:
    put(ieca, discovered(A))
    assert priority(ieca, A) == pytest.approx(-0.3)
    get(ieca)
    put(ieca, discovered(A + "1", parent=A), discovered(A + "2", parent=A), known(A))
    expected = -((1 - 0.35) * 0.3 + math.log10(2))
    assert priority(ieca, A + "1") == pytest.approx(expected)


def test_best_first_within_a_queue_and_queues_by_their_best(opic: Served) -> None:
    put(opic, discovered(A))
    get(opic)
    kids = [A + str(i) for i in range(4)]
    put(opic, *(discovered(k, parent=A) for k in kids), known(A))  # 0.25 each
    put(opic, discovered(B))  # 1.0, another queue
    assert get(opic, per_queue=1, queues=1) == [B]
    # equal priorities go in the order the strategy gave them (the page's link order)
    assert get(opic, per_queue=2) == kids[:2]
    assert get(opic, key="a.example") == kids[2:]
    assert get(opic) == []  # everything is locked now


def test_lock_ends_after_delay_requestable(opic: Served) -> None:
    put(opic, discovered(A))
    assert get(opic, lock=10) == [A]
    opic.clock.now += 9
    assert get(opic) == []
    opic.clock.now += 1
    assert get(opic) == [A]
    opic.clock.now += 29  # default lock 30 s
    assert get(opic) == []
    opic.clock.now += 1
    assert get(opic) == [A]


def test_revisit_is_a_new_cycle(opic: Served) -> None:
    put(opic, discovered(A))
    get(opic)
    assert put(opic, known(A, refetch=int(T0) + 100)) == [OK]
    assert get(opic) == []
    record = opic.frontier.url_record("DEFAULT", A)
    assert record is not None and record.cycle == 1
    opic.clock.now = T0 + 100
    assert get(opic) == [A]
    put(opic, known(A))  # the fetch of cycle 1: counted again
    assert opic.frontier.engine.crawled("DEFAULT") == 2
    assert opic.frontier.engine.stats.duplicates == 0
    put(opic, known(A))  # the same report again: not counted
    assert opic.frontier.engine.crawled("DEFAULT") == 2
    assert get(opic) == []


def _entry_with_not_before(url: str, not_before_s: float) -> FrontierEntry:
    """A frontier entry held until `not_before_s` (a paused host, a scheduled revisit), as
    the service in front of a live job reads it from the frontier topic."""
    host = url.split("/")[2]
    return FrontierEntry(
        url, host, 2.0, "opic", "DEFAULT", 0, None, int(T0 * 1000), {"opic.cash": "2"},
        not_before=int(not_before_s * 1000),
    )  # fmt: skip


def test_an_entrys_not_before_holds_its_url_and_is_its_refetch_date(opic: Served) -> None:
    put(opic, discovered(A), discovered(B))
    opic.frontier.records.write([], [_entry_with_not_before(A, T0 + 100)])
    assert get(opic) == [B]
    opic.clock.now = T0 + 99.999
    assert get(opic, key="a.example") == []
    opic.clock.now = T0 + 100
    assert get(opic, key="a.example") == [A]
    assert put(opic, known(A)) == [OK]  # fetched; the client asks for no refetch
    status = opic.stub.GetURLStatus(pb.URLStatusRequest(url=A))
    assert status.WhichOneof("item") == "known" and status.known.refetchable_from_date == 0
    # the frontier's word that it is to be fetched again, at T0 + 500.5 s: a refetch date
    opic.frontier.records.write([], [_entry_with_not_before(A, T0 + 500.5)])
    status = opic.stub.GetURLStatus(pb.URLStatusRequest(url=A))
    assert status.known.refetchable_from_date == int(T0) + 501  # rounded up to a second
    opic.clock.now = T0 + 500.4
    assert get(opic, key="a.example") == []
    opic.clock.now = T0 + 500.5
    assert get(opic, key="a.example") == [A]


def test_a_url_record_keeps_its_not_before_and_an_older_one_reads_without() -> None:
    record = UrlRecord(queue="a", priority=1.0, not_before=1_700_000_100_000)
    assert decode_url_record(encode_url_record(record)) == record
    older = json.loads(encode_url_record(record))
    del older["n"]  # as a version without the field wrote it
    assert decode_url_record(json.dumps(older).encode()).not_before == 0


def test_the_engines_revisits_bring_a_reported_page_back(revisited: Served) -> None:
    """With `--revisit fixed:10m` the engine's entry for a reported page is its refetch
    date; the report of that fetch is the revisit (its links routed, no page counted)."""
    s = revisited
    put(s, discovered(A))
    assert get(s) == [A]
    assert put(s, known(A)) == [OK]
    status = s.stub.GetURLStatus(pb.URLStatusRequest(url=A))
    assert status.known.refetchable_from_date == int(T0) + 600
    s.clock.now = T0 + 599
    assert get(s) == []
    s.clock.now = T0 + 600
    assert get(s) == [A]
    put(s, discovered(A + "new", parent=A))
    assert put(s, known(A)) == [OK]
    engine = s.frontier.engine
    assert (engine.crawled("DEFAULT"), engine.stats.revisits) == (1, 1)
    assert priority(s, A + "new") == 1.0  # the cash A paid at its revisit (OPIC's echo)
    status = s.stub.GetURLStatus(pb.URLStatusRequest(url=A))
    assert status.known.refetchable_from_date == int(T0) + 1200


def test_outlinks_of_a_silent_parent_are_seeded_after_the_timeout(opic: Served) -> None:
    put(opic, discovered(A + "c", parent=A + "never"))
    assert get(opic) == []
    opic.clock.now += 59
    assert opic.frontier.flush_expired() == 0
    opic.clock.now += 1
    assert opic.frontier.flush_expired() == 1
    assert priority(opic, A + "c") == 1.0  # an OPIC seed
    assert get(opic) == [A + "c"]


def test_late_outlinks_become_seeds(opic: Served) -> None:
    put(opic, discovered(A))
    get(opic)
    put(opic, known(A))
    put(opic, discovered(A + "late", parent=A))
    assert priority(opic, A + "late") == 1.0


def test_queue_controls(opic: Served) -> None:
    stub = opic.stub
    put(opic, discovered(A), discovered(A + "2"), discovered(B))
    stub.BlockQueueUntil(pb.BlockQueueParams(key="a.example", time=int(T0) + 50))
    assert get(opic) == [B]
    # active: holds URLs not completed and is not blocked (a.example is blocked)
    assert list(stub.ListQueues(pb.Pagination()).values) == ["b.example"]
    opic.clock.now += 50
    stub.SetDelay(pb.QueueDelayParams(key="a.example", delay_requestable=20))
    assert get(opic, per_queue=1, key="a.example") == [A]
    assert get(opic, per_queue=1, key="a.example") == []  # waits 20 s after serving
    opic.clock.now += 20
    assert get(opic, per_queue=1, key="a.example") == [A + "2"]
    stub.SetCrawlLimit(pb.CrawlLimitParams(key="b.example", limit=1))
    put(opic, known(B), discovered(B + "2"))
    opic.clock.now += 100
    assert get(opic, key="b.example") == []  # one completed: the limit
    listed = stub.ListQueues(pb.Pagination(include_inactive=True, size=1, start=1))
    assert list(listed.values) == ["b.example"] and listed.total == 2 and listed.size == 1


def test_a_host_that_answered_503_is_backed_off_by_the_host_rule(opic: Served) -> None:
    """A page reported with status 503 (no Retry-After) pauses its host for the host rule's
    first back-off, 60 s ± 10 %: its queue serves nothing meanwhile, the others go on."""
    put(opic, discovered(A), discovered(A + "2"), discovered(B))
    assert sorted(get(opic, per_queue=1)) == [A, B]
    put(opic, known(A, fetch_statusCode=["503"]))
    opic.clock.now += 31  # past the 30 s lock of A + "2"'s queue mate, inside the back-off
    assert get(opic, key="a.example") == []
    assert "a.example" not in list(opic.stub.ListQueues(pb.Pagination()).values)
    opic.clock.now += 36  # 67 s after the 503: past the longest back-off (66 s)
    assert get(opic, key="a.example") == [A + "2"]


def test_stats_active_and_listings(opic: Served) -> None:
    stub = opic.stub
    put(opic, discovered(A), discovered(A + "2"), discovered(B), discovered(B, crawl="c2"))
    get(opic, key="a.example", per_queue=1)
    put(opic, known(B))
    stats = stub.GetStats(pb.QueueWithinCrawlParams())
    assert (stats.size, stats.inProcess, stats.numberOfQueues) == (1, 1, 2)
    assert dict(stats.counts) == {"completed": 1, "active_queues": 1}
    assert stats.crawlID == "DEFAULT"
    assert stub.GetStats(pb.QueueWithinCrawlParams(key="b.example")).counts["completed"] == 1
    assert list(stub.ListCrawls(pb.Local()).values) == ["DEFAULT", "c2"]
    assert list(stub.ListNodes(pb.Empty()).values) == ["127.0.0.1:0"]
    assert list(stub.ListQueues(pb.Pagination()).values) == ["a.example"]
    stub.SetActive(pb.Active(state=False))
    assert stub.GetActive(pb.Local()).state is False
    assert get(opic, any_crawl=True) == []
    stub.SetActive(pb.Active(state=True))
    assert sorted(get(opic, any_crawl=True)) == [A + "2", B]  # DEFAULT's A2, c2's B
    status = stub.GetURLStatus(pb.URLStatusRequest(url=B))
    assert status.WhichOneof("item") == "known" and status.creation_date == int(T0)
    urls = [i.discovered.info.url or i.known.info.url for i in stub.ListURLs(pb.ListUrlParams())]
    assert urls == [A, A + "2", B]
    filtered = stub.ListURLs(pb.ListUrlParams(filter="A.EXAMPLE/2", ignoreCase=True))
    assert [i.discovered.info.url for i in filtered] == [A + "2"]
    assert stub.CountURLs(pb.CountUrlParams(key="a.example")).value == 2
    assert stub.CountURLs(pb.CountUrlParams(filter="b.")).value == 1
    stub.SetLogLevel(pb.LogLevelParams(package="frontierflow", level=pb.LogLevelParams.DEBUG))


def test_deletes_and_purges(opic: Served) -> None:
    stub = opic.stub
    put(opic, discovered(A), discovered(A + "2"), discovered(B), discovered(B, crawl="c2"))
    assert stub.DeleteQueue(pb.QueueWithinCrawlParams(key="a.example")).value == 2
    assert stub.CountURLs(pb.CountUrlParams()).value == 1
    opic.clock.now += 3 * 86_400
    put(opic, discovered(A))
    assert stub.PurgeURLs(pb.PurgeUrlParams(days=2)).value == 1  # B, 3 days old
    assert stub.DeleteCrawl(pb.DeleteCrawlMessage(value="c2")).value == 1
    assert list(stub.ListCrawls(pb.Local()).values) == ["DEFAULT"]
    assert stub.DeleteCrawl(pb.DeleteCrawlMessage(value="nope")).value == 0


def test_put_discovered_batches(opic: Served) -> None:
    batch = pb.DiscoveredBatch(ID="b1", items=[info(A), info("ftp://x/"), info(B)])
    acks = list(opic.stub.PutDiscovered(iter([batch])))
    assert [(a.ID, list(a.statuses)) for a in acks] == [("b1", [OK, SKIPPED, OK])]


# ------------------------------------------------------------------ bad input


def test_malformed_items_are_skipped_and_nothing_is_stored(opic: Served) -> None:
    items = [
        discovered("not a url"),
        discovered("ftp://a.example/"),
        discovered("https://a.example/" + "x" * 9000),
        pb.URLItem(ID="empty"),
        known(A, fetch_statusCode=["abc"]),
        known(A, terms=["no-count"]),
        discovered(A, crawl="bad\x00crawl"),
    ]
    acks = list(opic.stub.PutURLs(iter(items)))
    assert [a.status for a in acks] == [SKIPPED] * len(items)
    assert acks[3].ID == "empty" and acks[0].ID == "not a url"
    assert opic.stub.CountURLs(pb.CountUrlParams()).value == 0
    assert opic.frontier.engine.crawled("DEFAULT") == 0


def test_unknown_crawl_and_url_answers(opic: Served) -> None:
    stub = opic.stub
    with pytest.raises(grpc.RpcError) as err:
        stub.GetURLStatus(pb.URLStatusRequest(url=A, crawlID="nope"))
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError) as err:
        stub.GetURLStatus(pb.URLStatusRequest(url="::bad"))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as err:
        stub.DeleteQueue(pb.QueueWithinCrawlParams(crawlID="x" * 300, key="k"))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    stats = stub.GetStats(pb.QueueWithinCrawlParams(crawlID="nope"))
    assert (stats.size, stats.numberOfQueues, stats.crawlID) == (0, 0, "nope")
    assert get(opic, crawl="nope") == []


def test_garbage_bytes_get_a_grpc_error_and_the_server_goes_on(opic: Served) -> None:
    raw = opic.channel.unary_unary(
        "/urlfrontier.URLFrontier/GetURLStatus",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    with pytest.raises(grpc.RpcError) as err:
        raw(b"\xff\xff\xff\xff\x0f garbage")
    assert err.value.code() is grpc.StatusCode.INTERNAL
    stream = opic.channel.stream_stream(
        "/urlfrontier.URLFrontier/PutURLs",
        request_serializer=lambda b: b,
        response_deserializer=lambda b: b,
    )
    valid = discovered(B).SerializeToString()
    acks = [pb.AckMessage.FromString(b) for b in stream(iter([b"\x0a\xff\xff", valid]))]
    assert [(a.ID, a.status) for a in acks] == [("", SKIPPED), (B, OK)]
    assert put(opic, discovered(A)) == [OK]


def test_huge_batch_and_oversized_message(opic: Served) -> None:
    urls = [f"https://h{i % 50}.example/p{i}" for i in range(5000)]
    acks = put(opic, *(discovered(u) for u in urls))
    assert acks == [OK] * len(urls)
    assert opic.stub.CountURLs(pb.CountUrlParams()).value == len(urls)
    big = discovered(A, text=["x" * (MAX_MESSAGE_BYTES + 1)])
    with pytest.raises(grpc.RpcError) as err:
        put(opic, big)
    assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    too_much_metadata = discovered(A, text=["x" * 2_000_001])
    assert put(opic, too_much_metadata) == [SKIPPED]


def test_client_gone_mid_stream(opic: Served) -> None:
    """GetURLs cancelled after one URL: what the server had not handed to the transport yet
    is unlocked at once (6 MB of URLs outrun gRPC's flow-control window, so most of it; the
    one the client read may be among them: the server cannot tell); the rest stays locked
    until its lock ends, as for any client. A PutURLs stream cancelled half-way keeps what
    was acknowledged and the server goes on."""
    urls = [f"{A}{i}" for i in range(300)]
    put(opic, *(discovered(u, note=["x" * 20_000]) for u in urls))
    call = opic.stub.GetURLs(pb.GetParams(crawlID="", delay_requestable=60))
    assert next(call).url in urls
    call.cancel()
    deadline = time.monotonic() + 10
    left: list[str] = []
    while len(left) < len(urls) // 2:  # the server learns of the cancellation asynchronously
        assert time.monotonic() < deadline, f"only {len(left)} URLs unlocked"
        left += get(opic, lock=3600)
    opic.clock.now += 3600
    assert sorted(get(opic)) == sorted(urls)  # every lock ends: nothing is lost

    def items() -> Iterator[pb.URLItem]:
        for i in range(100):
            yield discovered(f"{B}{i}")

    call2 = opic.stub.PutURLs(items())
    for acked, _ack in enumerate(call2, start=1):
        if acked == 10:
            call2.cancel()
            break
    stored = opic.stub.CountURLs(pb.CountUrlParams(key="b.example")).value
    assert 10 <= stored <= 100
    assert put(opic, discovered(B + "after")) == [OK]


def test_a_record_whose_seed_step_was_lost_is_seeded_on_start(tmp_path: Path) -> None:
    """A discovered URL's record committed but not the seed step after it (a kill between
    the two): the next start seeds it, so it does not sit unscored for ever."""
    strat = build_strategy("opic", budget=1000)
    with RocksDBStore(tmp_path / "s", Frontier.families_for(strat)) as store:
        with store.transaction() as txn:
            txn.put(URLS_FAMILY, crawl_key("DEFAULT", A), encode_url_record(UrlRecord(queue="a")))
            orphan = UrlRecord(queue="a", waiting_for=A + "gone")  # its group is gone too
            txn.put(URLS_FAMILY, crawl_key("DEFAULT", A + "x"), encode_url_record(orphan))
        frontier = Frontier(strat, store, clock=Clock())
        assert [frontier.url_record("DEFAULT", u).priority for u in (A, A + "x")] == [1.0, 1.0]
        served = frontier.get_urls(None, "", 0, 0, 0)
        assert sorted(s.url for s in served) == [A, A + "x"]


def test_queue_controls_are_the_host_rules_state_and_survive_a_restart(tmp_path: Path) -> None:
    """BlockQueueUntil, SetDelay and SetCrawlLimit write the queue's host state (the one
    the host rule keeps from the reports, `state.hosts`), in the store: a restarted service
    still holds the block, the delay and the limit; and a queue setting kept apart by an
    older version is turned into host state on start."""
    strat = build_strategy("opic", budget=1000)
    path = tmp_path / "state"
    clock = Clock()
    store = RocksDBStore(path, Frontier.families_for(strat))
    frontier = Frontier(strat, store, FrontierSettings(), clock)
    frontier.set_queue("DEFAULT", "a.example", blocked_until_s=int(T0) + 50)
    frontier.set_queue("DEFAULT", "b.example", delay_s=20, crawl_limit=3)
    frontier.set_queue("DEFAULT", "", delay_s=5)
    # an older version's QueueSettings of c.example: blocked until T0 + 80 s, limit 2
    with store.transaction() as txn:
        txn.put(
            QUEUES_FAMILY,
            crawl_key("DEFAULT", "c.example"),
            encode_queue_settings(QueueSettings(blocked_until=int(T0) + 80, crawl_limit=2)),
        )
    store.close()

    store = RocksDBStore(path, Frontier.families_for(strat))
    try:
        frontier = Frontier(strat, store, FrontierSettings(), clock)
        hosts = frontier.records.index.hosts
        a = hosts[group_key("DEFAULT", "a.example")]
        assert (a.paused_until, a.reason) == ((int(T0) + 50) * 1000, "blocked")
        b = hosts[group_key("DEFAULT", "b.example")]
        assert (b.delay_ms, b.page_limit, b.paused_until) == (20_000, 3, 0)
        assert hosts[group_key("DEFAULT", "")].delay_ms == 5_000
        c = hosts[group_key("DEFAULT", "c.example")]
        assert (c.paused_until, c.page_limit) == ((int(T0) + 80) * 1000, 2)
        assert list(store.items(QUEUES_FAMILY)) == []  # turned into host state once
        raw = store.get(META_FAMILY, host_store_key(group_key("DEFAULT", "b.example")))
        assert raw is not None and decode_host_state(raw) == b
        # a deleted crawl takes its host states along
        frontier.delete("DEFAULT", None)
        assert not [k for k in frontier.records.index.hosts if k.startswith("DEFAULT\x00")]
    finally:
        store.close()
