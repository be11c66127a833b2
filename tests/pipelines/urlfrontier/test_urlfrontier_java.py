"""Wire compatibility with what StormCrawler links against: the URL Frontier project's own
generated Java stubs (urlfrontier-API 2.3.1 and 2.4, through Maven) call every rpc their
version has against our server (`infra/urlfrontier/harness`)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.urlfrontier.frontier import Frontier, FrontierSettings
from frontierflow.pipelines.urlfrontier.service import serve
from frontierflow.state.storage.rocksdb import RocksDBStore

HARNESS = Path(__file__).resolve().parents[3] / "infra" / "urlfrontier" / "harness" / "run.sh"
COMMON = [
    "PutURLs acks",
    "GetURLs serves the seeds",
    "PutURLs known",
    "GetURLs serves the outlink",
    "ListNodes",
    "ListCrawls",
    "ListQueues",
    "GetStats",
    "BlockQueueUntil",
    "SetDelay",
    "SetActive/GetActive false",
    "SetActive/GetActive true",
    "SetLogLevel",
    "DeleteQueue",
    "DeleteCrawl",
    "ListCrawls after DeleteCrawl",
]
ADDED_IN_24 = ["SetCrawlLimit", "GetURLStatus known", "GetURLStatus unknown", "ListURLs"]


@pytest.fixture
def port(tmp_path: Path) -> Iterator[int]:
    strategy = build_strategy("opic", budget=1000)
    with RocksDBStore(tmp_path / "state", Frontier.families_for(strategy)) as store:
        frontier = Frontier(strategy, store, FrontierSettings(node="127.0.0.1:7071"))
        server, bound, stop = serve(frontier, "127.0.0.1:0")
        try:
            yield bound
        finally:
            stop.set()
            server.stop(None).wait(10)


@pytest.mark.skipif(
    shutil.which("javac") is None or shutil.which("mvn") is None, reason="needs Java 17 and Maven"
)
@pytest.mark.parametrize("version", ["2.3.1", "2.4"])
def test_the_url_frontier_java_stubs_call_every_rpc(port: int, version: str) -> None:
    done = subprocess.run(
        ["bash", str(HARNESS), version, str(port)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    checks = [
        line.removeprefix("CHECK ")
        for line in done.stdout.splitlines()
        if line.startswith("CHECK ")
    ]
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "ALL CHECKS PASSED" in done.stdout
    expected = COMMON if version == "2.3.1" else COMMON[:13] + ADDED_IN_24 + COMMON[13:]
    assert [c for c in checks if c != "putURLs completes"] == expected
