"""Kafka in → Beam on Prism → Kafka out, on the real broker: the frontier a fetcher rebuilds
from the compacted topic equals the one `frontierflow replay` gives for the same events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_live_kafka import (
    BUDGET,
    _avro,
    _comparable,
    _events,
    _latest_frontier,
    _produce,
    _read_topic,
    _replayed,
    _settings,
)

from frontierflow.pipelines.beam_kafka import run_beam_kafka
from frontierflow.schemas.codecs import AvroCodec

pytestmark = [pytest.mark.kafka, pytest.mark.beam_runner]


def test_kafka_through_prism_equals_replay(
    kafka_broker: Any, prism_binary: Path, tmp_path: Path
) -> None:
    records = _events(300, seed=41)
    settings = _settings(kafka_broker.bootstrap)
    _produce(settings, [*_avro(records), b"garbage", b'{"url": "ftp://x/"}'])
    run_beam_kafka(
        settings,
        strategy_name="ieca",
        budget=BUDGET,
        beam_args=[
            "--runner=PrismRunner",
            f"--prism_location={prism_binary}",
            "--environment_type=LOOPBACK",
        ],
    )
    expected, _ = _replayed(tmp_path, records)
    live = _latest_frontier(settings)
    assert len(live) > 200
    assert _comparable(live) == _comparable(expected)
    dead = [
        AvroCodec.for_name("DeadLetter").decode(v)
        for _, v in _read_topic(settings, settings.topics.dead_letter)
        if v is not None
    ]
    assert sorted(d["raw"] for d in dead) == [b"garbage", b'{"url": "ftp://x/"}']
