"""The Beam streaming form writes the frontier topic exactly as the live embedded engine
does: per partition the same keys (a URL, or URL and parent for a reply request), the same
latest value per key and the same tombstones, the partition chosen by host. A fleet of
fetchers sharing the frontier as one consumer group relies on it."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from lafc_recording import (
    FRONTIER_PARTITIONS,
    engine_and_beam_settings,
    frontier_per_partition,
    lafc,
    recorded_crawl,
)

from frontierflow.connectors.kafka import host_partition
from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.kafka import run_beam_kafka_stream
from frontierflow.pipelines.embedded.live import LiveOptions, run_live
from frontierflow.schemas.records import REPLY_KEY_SEPARATOR, split_frontier_key

pytestmark = [pytest.mark.kafka, pytest.mark.beam_runner]


def test_beam_stream_writes_the_frontier_as_the_embedded_engine(
    kafka_broker: Any, kafka_client: Any, prism_binary: Path, tmp_path: Path
) -> None:
    events = recorded_crawl()
    assert all(a.fetched_at <= b.fetched_at for a, b in itertools.pairwise(events))
    engine, beam_side = engine_and_beam_settings(kafka_client.settings(kafka_broker.bootstrap))
    kafka_client.produce(engine, kafka_client.avro(e.to_avro() for e in events))

    options = LiveOptions(step_size=7, exit_when_idle=True, retry_backoff_s=0.2)
    run_live(engine, lafc(), tmp_path / "live", options)
    run_beam_kafka_stream(
        beam_side,
        strategy_name="lafc",
        budget=1000,
        windows=ClockWindows(60_000),
        beam_args=[
            "--runner=PrismRunner",
            f"--prism_location={prism_binary}",
            "--environment_type=LOOPBACK",
        ],
        strategy=lafc(),
    )

    expected = frontier_per_partition(engine)
    written = frontier_per_partition(beam_side)
    assert set(expected) == set(range(FRONTIER_PARTITIONS))
    assert written == expected
    # the comparison covers what it should: hosts spread over partitions, reply requests
    # with keys of their own, tombstones, every key in the partition of its URL's host
    keys = {k: p for p, latest in expected.items() for k in latest}
    assert sum(1 for latest in expected.values() if latest) >= 2
    assert any(REPLY_KEY_SEPARATOR.encode() in k for k in keys)
    assert any(v is None for latest in expected.values() for v in latest.values())
    assert any(v is not None for latest in expected.values() for v in latest.values())
    for key, partition in keys.items():
        parsed = split_frontier_key(key.decode())
        url = parsed if isinstance(parsed, str) else parsed[0]
        assert partition == host_partition(url, FRONTIER_PARTITIONS), key
