"""LAFC on the live path: `frontierflow run --strategy lafc --topic ...` against a real broker
leaves the same state and frontier as `frontierflow replay` of the same recorded crawl."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from topical_webs import random_web

from frontierflow.pipelines.evaluation.simulator import simulate_cycles
from frontierflow.pipelines.strategies.lafc import Lafc, LafcSettings
from frontierflow.schemas.container import write_container
from frontierflow.schemas.records import FetchEvent
from frontierflow.state.relevance import Topic
from frontierflow.state.storage.rocksdb import RocksDBStore

pytestmark = pytest.mark.kafka

TOPIC = "tcp:2,socket:1"


def _recorded_crawl() -> list[FetchEvent]:
    """Three cycles of a simulated LAFC crawl, as the fetchers would have reported it."""
    events: list[FetchEvent] = []
    strategy = Lafc(Topic.parse(TOPIC), LafcSettings(control_threshold=0.3, seed=3))
    simulate_cycles(
        random_web(120, 5), strategy, [0], 60, 3, crawl_id="live", on_event=events.append
    )
    return events


def _state(state_dir: Path) -> dict[str, dict[bytes, bytes]]:
    families = ("lafc", "crawled")
    with RocksDBStore(state_dir, (*families, "meta")) as store:
        return {f: dict(store.items(f)) for f in families}


def test_run_lafc_against_kafka_equals_replay(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path
) -> None:
    events = _recorded_crawl()
    assert sum(e.status == 208 for e in events) > 0  # answers without download are in the log
    records = [e.to_avro() for e in events]
    settings = kafka_client.settings(kafka_broker.bootstrap)
    topics = settings.topics
    kafka_client.produce(settings, kafka_client.avro(records))

    lafc_args = ["--strategy", "lafc", "--topic", TOPIC, "--lafc-c", "0.3", "--seed", "3"]
    run = [
        sys.executable, "-m", "frontierflow.pipelines.cli", "run",
        "--bootstrap-servers", kafka_broker.bootstrap,
        "--topic-fetch-events", topics.fetch_events,
        "--topic-frontier", topics.frontier,
        "--topic-fetcher-control", topics.fetcher_control,
        "--topic-dead-letter", topics.dead_letter,
        "--state-dir", str(tmp_path / "live"), "--step-size", "7", "--exit-when-idle",
        *lafc_args,
    ]  # fmt: skip
    done = subprocess.run(run, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    log = tmp_path / "crawl.avro"
    write_container(log, "FetchEvent", records)
    replay = [
        sys.executable, "-m", "frontierflow.pipelines.cli", "replay", str(log),
        "--state-dir", str(tmp_path / "replayed"), "--out", str(tmp_path / "out.jsonl"),
        "--step-size", "7", *lafc_args,
    ]  # fmt: skip
    done = subprocess.run(replay, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]

    live_state, replayed_state = _state(tmp_path / "live"), _state(tmp_path / "replayed")
    assert len(live_state["lafc"]) > 20
    assert live_state == replayed_state
    # and the automata learned: some probabilities moved away from uniform
    entries = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert {e["strategy"] for e in entries} == {"lafc"}
    assert any(e["echo"].get("reply") == "1" for e in entries)
