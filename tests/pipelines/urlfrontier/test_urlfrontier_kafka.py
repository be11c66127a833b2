"""`frontierflow urlfrontier --bootstrap-servers`: the service in front of a live
`frontierflow run` job on a real broker. Priorities come back from the job's frontier topic
and equal what the embedded service gives for the same puts (OPIC: seeds hold cash 1, a
page with two outlinks gives each 0.5); a report's FetchEvent is counted once by the job
even when it is sent twice."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from polling import wait_for

from frontierflow.connectors.urlfrontier import urlfrontier_pb2 as pb
from frontierflow.connectors.urlfrontier.convert import ItemLimits, checked_info
from frontierflow.pipelines.embedded.engine import EngineStats
from frontierflow.pipelines.embedded.live import LiveOptions, run_live
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.urlfrontier.frontier import Frontier
from frontierflow.pipelines.urlfrontier.kafka import KafkaFrontier
from frontierflow.state.storage.rocksdb import RocksDBStore

pytestmark = pytest.mark.kafka

DEADLINE_S = 60
A = "https://a.example/"


def _item(url: str, parent: str | None = None, status: int | None = None) -> Any:
    meta = {"url.path": pb.StringList(values=[parent])} if parent else {}
    if status is not None:
        meta["fetch.statusCode"] = pb.StringList(values=[str(status)])
    return checked_info(pb.URLInfo(url=url, metadata=meta), ItemLimits())


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_priorities_come_back_from_the_live_job(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path, client: str
) -> None:
    settings = dataclasses.replace(
        kafka_client.settings(kafka_broker.bootstrap), client_library=client
    )
    stop = threading.Event()
    seen = EngineStats()

    def on_step(stats: EngineStats) -> None:
        seen.events, seen.duplicates = stats.events, stats.duplicates

    options = LiveOptions(step_size=10, poll_timeout_ms=100, speed=None)
    strategy = build_strategy("opic", budget=1000)
    with RocksDBStore(tmp_path / "svc", Frontier.families_for(strategy)) as store:
        frontier = KafkaFrontier(strategy, store, settings)
        job = threading.Thread(
            target=run_live,
            args=(settings, build_strategy("opic", budget=1000), tmp_path / "job", options, stop),
            kwargs={"on_step": on_step},
            daemon=True,
        )
        job.start()
        try:
            assert frontier.put_discovered(_item(A)).ok
            assert frontier.url_record("DEFAULT", A).priority == 1.0  # seeded here
            assert [s.url for s in frontier.get_urls(None, "", 0, 0, 0)] == [A]
            for child in ("x", "y"):
                assert frontier.put_discovered(_item(A + child, parent=A)).ok
            assert frontier.put_known(_item(A), 0).ok
            assert frontier.put_known(_item(A), 0).ok  # a repeated report publishes nothing
            wait_for(
                lambda: all(frontier.url_record("DEFAULT", A + c).priority == 0.5 for c in "xy"),
                "the job's entries for the outlinks to come back",
                DEADLINE_S,
            )
            served = sorted(s.url for s in frontier.get_urls(None, "", 0, 0, 0))
            assert served == [A + "x", A + "y"]
            wait_for(lambda: seen.events == 1, "the job to count the page", DEADLINE_S)
            assert seen.duplicates == 0
            # the host rule is the service's too with the strategy on Kafka: a 503 pauses
            # the queue (60 s ± 10 %), which is then no longer active
            assert frontier.queues("DEFAULT", include_inactive=False) == ["a.example"]
            assert frontier.put_known(_item(A + "x", status=503), 0).ok
            assert frontier.queues("DEFAULT", include_inactive=False) == []
        finally:
            stop.set()
            job.join(DEADLINE_S)
            frontier.close()
