"""How fast the URL Frontier service takes a crawl's puts and serves URLs, over a real gRPC
channel on 127.0.0.1: a synthetic crawl (pages on 50 hosts, each reporting its outlinks
as discovered URLs naming it in `url.path`, then itself as known) goes through PutURLs in
one stream, then GetURLs is called until it has served `serve` URLs."""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from frontierflow.connectors.urlfrontier import urlfrontier_pb2 as pb
from frontierflow.connectors.urlfrontier import urlfrontier_pb2_grpc as pb_grpc
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.urlfrontier.frontier import Frontier
from frontierflow.pipelines.urlfrontier.service import serve
from frontierflow.state.storage.rocksdb import RocksDBStore

HOSTS = 50


@dataclass(frozen=True, slots=True)
class BenchResult:
    items: int
    pages: int
    put_seconds: float
    served: int
    get_seconds: float

    def lines(self) -> list[str]:
        return [
            f"PutURLs: {self.items} items ({self.pages} page reports and their outlinks) in "
            f"{self.put_seconds:.2f} s = {self.items / self.put_seconds:.0f} items/s, "
            f"{self.pages / self.put_seconds:.0f} pages/s",
            f"GetURLs: {self.served} URLs in {self.get_seconds:.2f} s = "
            f"{self.served / self.get_seconds:.0f} URLs/s",
        ]


def _url(page: int) -> str:
    return f"https://h{page % HOSTS}.example/p{page}"


def crawl_items(pages: int, outlinks: int, seed: int = 1) -> list[pb.URLItem]:
    rng = random.Random(seed)
    items = [
        pb.URLItem(discovered=pb.DiscoveredURLItem(info=pb.URLInfo(url=_url(p))))
        for p in range(min(20, pages))
    ]
    for page in range(pages):
        path = {"url.path": pb.StringList(values=[_url(page)])}
        for child in rng.sample(range(pages * 5), outlinks):
            info = pb.URLInfo(url=_url(child), metadata=path)
            items.append(pb.URLItem(discovered=pb.DiscoveredURLItem(info=info)))
        items.append(pb.URLItem(known=pb.KnownURLItem(info=pb.URLInfo(url=_url(page)))))
    return items


def run_bench(strategy: Strategy[object], pages: int, outlinks: int, serve_n: int) -> BenchResult:
    items = crawl_items(pages, outlinks)
    with (
        tempfile.TemporaryDirectory() as tmp,
        RocksDBStore(Path(tmp), Frontier.families_for(strategy)) as store,
    ):
        frontier = Frontier(strategy, store)
        server, port, stop = serve(frontier, "127.0.0.1:0")
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        try:
            stub = pb_grpc.URLFrontierStub(channel)
            started = time.perf_counter()
            acks = sum(1 for _ in stub.PutURLs(iter(items)))
            put_s = time.perf_counter() - started
            started = time.perf_counter()
            served = 0
            while served < serve_n:
                got = sum(1 for _ in stub.GetURLs(pb.GetParams(max_urls_per_queue=10, crawlID="")))
                if not got:
                    break
                served += got
            get_s = time.perf_counter() - started
        finally:
            channel.close()
            stop.set()
            server.stop(None).wait(10)
    return BenchResult(acks, pages, put_s, served, get_s)
