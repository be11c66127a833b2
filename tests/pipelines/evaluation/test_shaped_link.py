"""A link shaped to follow a bandwidth trace (network namespace, veth, tc tbf): downloads
through it run at the rate of the trace's sample in force, and a real crawl through it
(nginx inside the namespace, the live job and the reference fetcher on a real broker) stays
within the link's capacity while the speed controller's decisions reach the fetcher.

Skipped, with the command's own refusal as the reason, where namespaces or tc are not
allowed (not root, no iproute2, no tbf)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from live_job import start_seeded_lafc
from polling import wait_for

from frontierflow.connectors.fetcher.loop import Fetcher
from frontierflow.connectors.fetcher.settings import FetcherSettings
from frontierflow.connectors.kafka import KafkaSettings, ensure_topics
from frontierflow.pipelines.evaluation.realcrawl import AccessLine
from frontierflow.pipelines.evaluation.shapedcrawl import ShapedWindow, shaped_crawl
from frontierflow.pipelines.evaluation.shaping import (
    ShapedLink,
    ShapeLog,
    ShapeSample,
    replay_trace,
    shaping_refused,
    tbf_args,
)
from frontierflow.pipelines.evaluation.speedsim import BandwidthTrace, read_trace
from frontierflow.schemas.codecs import decode_record
from frontierflow.schemas.records import FetchEvent, ScalingDecision

BLOB = 400_000  # bytes per download: 1.6 s at 2 Mbit/s, 0.2 s at 16 Mbit/s

# Inside the namespace: answer every connection that says "go" with BLOB bytes, then close.
SERVER = """
import socket, sys
s = socket.create_server((sys.argv[1], int(sys.argv[2])))
blob = b"x" * int(sys.argv[3])
while True:
    c, _ = s.accept()
    try:
        if c.recv(16) == b"go":
            c.sendall(blob)
    except OSError:
        pass
    c.close()
"""


@pytest.fixture(scope="module")
def refusal() -> str | None:
    return shaping_refused(f"ffprobe-{os.getpid()}")


@pytest.fixture
def link(refusal: str | None) -> Iterator[ShapedLink]:
    if refusal is not None:
        pytest.skip(f"this machine refuses a shaped link: {refusal}")
    made = ShapedLink.create(f"fft-{os.getpid()}", "10.213.20.1", "10.213.20.2")
    try:
        yield made
    finally:
        made.close()


def _download(address: str, port: int) -> tuple[int, float]:
    """(bytes received, seconds) of one download from the server inside the namespace."""
    with socket.create_connection((address, port), timeout=10) as conn:
        conn.sendall(b"go")
        started = time.monotonic()
        received = 0
        while chunk := conn.recv(65536):
            received += len(chunk)
        return received, time.monotonic() - started


def _answers(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=0.2).close()
    except OSError:
        return False
    return True


def test_downloads_follow_the_rate_of_the_sample_in_force(link: ShapedLink, tmp_path: Path) -> None:
    port = 8123
    server = subprocess.Popen(
        [*link.run_inside(), sys.executable, "-c", SERVER, link.ns_address, str(port), str(BLOB)]
    )
    try:
        wait_for(lambda: _answers(link.ns_address, port), "the server in the namespace", 20)
        path = tmp_path / "trace"
        path.write_text("0\t1.0\n8\t8.0\n")  # Mbit/s; scaled ×2 and compressed ×2 below
        trace = read_trace(path).scaled(rate_scale=2.0, speedup=2.0)  # 2 then 16, 4 s each
        applied: list[tuple[str, ShapeSample]] = []
        stop = threading.Event()
        replay = threading.Thread(
            target=replay_trace, args=(link, trace, stop, lambda *a: applied.append(a))
        )
        replay.start()
        try:
            wait_for(lambda: len(applied) >= 1, "the first sample")
            low_bytes, low_s = _download(link.ns_address, port)
            low_done = time.time()
            wait_for(lambda: len(applied) >= 2, "the second sample")
            high_bytes, high_s = _download(link.ns_address, port)
            wait_for(lambda: applied[-1][0] == "end", "the end of the trace", 20)
        finally:
            stop.set()
            replay.join(timeout=20)
    finally:
        server.kill()
        server.wait(timeout=10)

    assert [(k, s.trace_s, s.mbps) for k, s in applied[:2]] == [
        ("sample", 0.0, 2.0),
        ("sample", 4.0, 16.0),
    ]
    assert low_done < applied[1][1].at, "the slow download outlasted its sample"
    assert low_bytes == high_bytes == BLOB
    low_mbps, high_mbps = BLOB * 8 / low_s / 1e6, BLOB * 8 / high_s / 1e6
    # Payload under the rate (frames carry headers too; the bucket, 2,500 bytes at 2 Mbit/s
    # and 20,000 at 16, adds 5% at most to a 400 kB download); at least half of it, even on
    # a busy machine.
    assert 1.0 <= low_mbps <= 2.0 * 1.05, low_mbps
    assert 8.0 <= high_mbps <= 16.0 * 1.05, high_mbps
    # the link never carried more than the rates allowed, plus one bucket per rate change
    log = ShapeLog(tuple(s for k, s in applied if k == "sample"), applied[-1][1])
    bucket = int(tbf_args(16.0)[4])
    assert 2 * BLOB <= log.delivered_bytes() <= log.allowed_bytes(0, float("inf")) + 2 * bucket


HOSTS = ("a.test", "b.test")
PAGES = 40
BUDGET = 45
PAD = 20_000  # bytes of text added to each page, so the link and not the machine limits
RATE_MBPS = 1.0  # 125 kB/s: about six pages a second


def test_crawl_through_a_shaped_link_gets_the_controllers_decisions(
    link: ShapedLink,
    kafka_broker: Any,
    kafka_client: Any,
    nginx_sites: Any,
    linked_site: Any,
    tmp_path: Path,
) -> None:
    sites = linked_site(tmp_path / "site", HOSTS, PAGES)
    for folder in sites.values():
        for page in folder.glob("*.html"):
            filler = "<p>" + "kernel buffer queue " * (PAD // 20) + "</p></body>"
            page.write_text(page.read_text().replace("</body>", filler))
    link.set_rate(RATE_MBPS)
    nginx = nginx_sites(sites, inside=link.run_inside(), address=link.ns_address)
    linked_site.fill_port(sites, nginx.port)
    settings = kafka_client.settings(kafka_broker.bootstrap)
    ensure_topics(settings)

    seeds = [f"http://{host}:{nginx.port}/index.html" for host in HOSTS]
    job = start_seeded_lafc(settings, tmp_path / "state", seeds, "shaped")
    fetcher = Fetcher(
        FetcherSettings(
            fetcher_id="f1",
            delay_s=0.05,
            allow_private=True,
            resolve={(h, nginx.port): link.ns_address for h in HOSTS},
            workers=4,
            max_workers=8,
            max_pages=BUDGET,
            idle_exit_s=30,
        ),
        KafkaSettings(
            bootstrap_servers=kafka_broker.bootstrap,
            topics=settings.topics,
            group_id=f"{settings.group_id}-fetchers",
        ),
    )
    sent_before = link.sent_bytes()
    started = time.time()
    stats = fetcher.run()
    crawl_s = time.time() - started
    sent = link.sent_bytes() - sent_before
    try:
        job.wait_applied(stats.events)
    finally:
        job.close()

    assert stats.downloads == BUDGET
    # every page crossed the shaped link: nginx served them in the namespace, and the link
    # carried at least their bodies and no more than its rate allowed (plus one bucket)
    pages = [r for r in nginx.requests() if r.path != "/robots.txt"]
    body = sum(r.bytes for r in pages)
    assert body >= BUDGET * 0.8 * PAD  # some downloads are 404s (missing.html)
    assert body <= sent <= RATE_MBPS * 125_000 * crawl_s + int(tbf_args(RATE_MBPS)[4])
    events = [
        decode_record(FetchEvent, v)
        for _, v in kafka_client.read_topic(settings, settings.topics.fetch_events)
    ]
    assert {e.fetcher_id for e in events} == {"f1"}
    # the speed controller decided for this fetcher, through the broker, window by window
    decisions = [
        decode_record(ScalingDecision, v)
        for _, v in kafka_client.read_topic(settings, settings.topics.fetcher_control)
    ]
    assert decisions and {d.fetcher_id for d in decisions} == {"f1"}
    assert all(d.window_end - d.window_start == 1000 for d in decisions)
    assert len(decisions) >= (body / (RATE_MBPS * 125_000)) // 2  # a crawl of so many seconds


def test_allowed_bytes_and_windows_worked_by_hand() -> None:
    """2 Mbit/s from t = 100 s, 16 Mbit/s from 104 s, the pass over at 108 s."""
    log = ShapeLog(
        (ShapeSample(100.0, 0.0, 2.0, 1_000), ShapeSample(104.0, 4.0, 16.0, 1_001_000)),
        ShapeSample(108.0, 8.0, float("nan"), 7_001_000),
    )
    # 2 Mbit/s = 250,000 B/s for 4 s, then 2,000,000 B/s for 4 s
    assert log.allowed_bytes(0, 1e12) == 250_000 * 4 + 2_000_000 * 4
    assert log.allowed_bytes(102, 106) == 250_000 * 2 + 2_000_000 * 2
    assert log.delivered_bytes() == 7_000_000
    line = AccessLine  # (start, end, host, method, path, status, bytes)
    requests = [
        line(100.0, 101.0, "a.test", "GET", "/1", 200, 500_000),
        line(103.0, 105.0, "a.test", "GET", "/2", 200, 3_000_000),
        line(108.0, 109.0, "a.test", "GET", "/3", 200, 9),  # after the pass: not counted
    ]
    events = [_event(101_000, 200), _event(105_000, 200), _event(106_000, 208)]
    decisions = [_decision(100_000, 104_000, 4, 5)]
    crawl = shaped_crawl(log, requests, events, decisions, window_s=4.0)
    assert (crawl.seconds, crawl.downloads, crawl.page_bytes) == (8.0, 2, 3_500_000)
    assert crawl.wire_share == 7_000_000 / 9_000_000
    assert crawl.page_share == 3_500_000 / 9_000_000
    assert (crawl.decisions, crawl.thread_changes) == (1, 1)
    # window 0: 2 Mbit/s, the link carried 1 MB in 4 s = 2 Mbit/s; window 1: 16 Mbit/s, 6 MB
    # = 12 Mbit/s (the counter at 104 s and at the end); threads: the decision ending at 104 s
    assert (log.sent_at(103.9), log.sent_at(104.0), log.sent_at(1e12)) == (
        1_000,
        1_001_000,
        7_001_000,
    )
    assert crawl.windows == (
        ShapedWindow(0.0, 2.0, 2.0, 1, 5),
        ShapedWindow(4.0, 16.0, 12.0, 1, 5),
    )


def test_a_scaled_trace_keeps_its_shape() -> None:
    trace = BandwidthTrace("t", np.array([0.0, 5.0]), np.array([1.0, 3.0]), 10.0)
    fast = trace.scaled(rate_scale=0.5, speedup=5.0)
    assert (list(fast.times), list(fast.mbps), fast.period) == ([0.0, 1.0], [0.5, 1.5], 2.0)
    assert fast.capacity_bytes(0, 2) == trace.capacity_bytes(0, 10) * 0.5 / 5.0
    with pytest.raises(ValueError, match="must be > 0"):
        trace.scaled(speedup=0.0)


def _event(fetched_at: int, status: int) -> FetchEvent:
    return FetchEvent(url="http://a.test/", fetched_at=fetched_at, status=status,
                      fetcher_id="f1", host="a.test")  # fmt: skip


def _decision(start: int, end: int, before: int, after: int) -> ScalingDecision:
    return ScalingDecision(fetcher_id="f1", window_start=start, window_end=end, pages=1,
                           crawl_speed=0.25, speed_mean=0.0, speed_stddev=0.0, e_cs=0.0,
                           e_cs_sign=-1, threads_before=before, threads_after=after,
                           learning=True, reason="test")  # fmt: skip
