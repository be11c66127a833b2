"""`frontierflow urlfrontier` survives kill -9: a client that resends what was not
acknowledged ends with the same state as an uninterrupted run.

A fixed script of puts (seeds, outlinks naming their parent in `url.path`, page reports)
goes to a server in a subprocess, which the test SIGKILLs at random points while the
stream runs; each restart on the same state directory takes the rest, from the first item
without an ack. The final stores — service records, IECA states, crawl counters — must
equal those of one clean run (creation dates and group ages, which are wall-clock, aside).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from polling import wait_for

from frontierflow.connectors.urlfrontier import urlfrontier_pb2 as pb
from frontierflow.connectors.urlfrontier import urlfrontier_pb2_grpc as pb_grpc
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.urlfrontier.frontier import Frontier
from frontierflow.state.storage.format import CRAWLED_FAMILY
from frontierflow.state.storage.rocksdb import RocksDBStore
from frontierflow.state.storage.store import META_FAMILY
from frontierflow.state.urlfrontier import (
    PENDING_FAMILY,
    URLS_FAMILY,
    decode_pending,
    decode_url_record,
)

PAGES = 150
HOSTS = 7


def _url(page: int) -> str:
    return f"https://h{page % HOSTS}.example/p{page}"


def _script() -> list[pb.URLItem]:
    """Seeds, then for 100 pages: their outlinks (parent in url.path), then their report."""
    rng = random.Random(11)
    items = [_discovered(_url(p), None) for p in range(5)]
    for page in range(100):
        for child in rng.sample(range(PAGES), 4):
            items.append(_discovered(_url(child), _url(page)))
        refetch = 2_000_000_000 if page % 10 == 0 else 0
        items.append(
            pb.URLItem(
                known=pb.KnownURLItem(
                    info=pb.URLInfo(url=_url(page)), refetchable_from_date=refetch
                )
            )
        )
    return items


def _discovered(url: str, parent: str | None) -> pb.URLItem:
    meta = {"url.path": pb.StringList(values=[parent])} if parent else {}
    return pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=url, metadata=meta)))


class Server:
    def __init__(self, state: Path, tmp: Path) -> None:
        port_file = tmp / f"port-{time.monotonic_ns()}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "frontierflow.pipelines.cli",
                "urlfrontier",
                "--port",
                "0",
                "--port-file",
                str(port_file),
                "--state-dir",
                str(state),
                "--strategy",
                "ieca",
                "--budget",
                "1000",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_for(lambda: self._port_written(port_file), "the server to write its port")
        self.port = int(port_file.read_text())
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.stub = pb_grpc.URLFrontierStub(self.channel)

    def _port_written(self, port_file: Path) -> bool:
        assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""
        return port_file.exists() and port_file.read_text().endswith("\n")

    def put_from(self, items: list[pb.URLItem], start: int, kill_after: int | None) -> int:
        """Send items[start:]; SIGKILL the server after `kill_after` acks. Returns the index
        of the first item without an ack."""
        acked = start
        try:
            for ack in self.stub.PutURLs(iter(items[start:])):
                assert ack.status == pb.AckMessage.OK
                acked += 1
                if kill_after is not None and acked - start >= kill_after:
                    self.proc.send_signal(signal.SIGKILL)
                    break
        except grpc.RpcError:
            pass
        return acked

    def stop(self, sig: int) -> int:
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=60)
        if self.proc.stderr:
            self.proc.stderr.close()
        return code


def _run(state: Path, tmp: Path, kills: list[int]) -> None:
    items = _script()
    start = 0
    for kill_after in [*kills, None]:
        server = Server(state, tmp)
        start = server.put_from(items, start, kill_after)
        if kill_after is None:
            assert start == len(items)
            assert server.stop(signal.SIGTERM) == 0
        else:
            assert server.stop(signal.SIGKILL) == -signal.SIGKILL


def _dump(state: Path) -> dict[str, Any]:
    strategy = build_strategy("ieca", budget=1000)
    with RocksDBStore(state, Frontier.families_for(strategy)) as store:
        return {
            "urls": {
                k: replace(decode_url_record(v), created=0) for k, v in store.items(URLS_FAMILY)
            },
            "pending": {k: decode_pending(v).outlinks for k, v in store.items(PENDING_FAMILY)},
            "ieca": dict(store.items(strategy.family)),
            "crawled": dict(store.items(CRAWLED_FAMILY)),
            "count": store.get(META_FAMILY, b"crawled/DEFAULT"),
        }


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("reference")
    _run(tmp / "state", tmp, [])
    return _dump(tmp / "state")


def test_reference_run_is_a_crawl(reference: dict[str, Any]) -> None:
    """The clean run fetched 100 pages, 10 of them due again as cycle 1, and scored the rest."""
    assert int.from_bytes(reference["count"], "big") == 100
    records = reference["urls"].values()
    assert sum(r.status.name == "REVISIT" and r.cycle == 1 for r in records) == 10
    assert all(r.priority is not None for r in records if r.status.name == "QUEUED")


def test_killed_three_times_ends_like_a_clean_run(
    tmp_path: Path, reference: dict[str, Any]
) -> None:
    rng = random.Random(5)
    kills = [rng.randrange(20, 160) for _ in range(3)]
    _run(tmp_path / "state", tmp_path, kills)
    assert _dump(tmp_path / "state") == reference
