"""The live engine on a real Kafka broker (started by infra/kafka/start.sh).

Every test uses topics of its own on the session's broker. The reference for "correct" is
`frontierflow replay` of the same events: the live job must leave the same state and the
same latest frontier entry per URL, also when killed, when the broker restarts, and when
malformed messages are mixed in, with either Kafka client library, and when a job switches
from one to the other on the same topics and state.
"""

from __future__ import annotations

import json
import math
import random
import signal
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from crash_hook import CHILD_PRELUDE
from polling import wait_for

from frontierflow.connectors.kafka import KafkaSettings
from frontierflow.pipelines.embedded.engine import EngineStats
from frontierflow.pipelines.embedded.live import LiveMetrics, LiveOptions, run_live
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.schemas.codecs import AvroCodec

pytestmark = pytest.mark.kafka

BUDGET = 1000
STEP = 25
DEADLINE_S = 120.0
CLIENTS = pytest.mark.parametrize("client", ["kafka-python", "confluent"])


def _run(settings: KafkaSettings, state_dir: Path, client: str = "auto", **kw: Any) -> EngineStats:
    options = LiveOptions(
        step_size=STEP, exit_when_idle=True, retry_backoff_s=0.2, kafka_client=client
    )
    return run_live(settings, build_strategy("ieca", budget=BUDGET), state_dir, options, **kw)


@CLIENTS
def test_end_to_end_equals_replay(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path, client: str
) -> None:
    records = kafka_client.events(400)
    settings = kafka_client.settings(kafka_broker.bootstrap)
    kafka_client.produce(settings, kafka_client.avro(records))
    stats = _run(settings, tmp_path / "state", client)
    assert stats.events == len({r["url"] for r in records})
    live = kafka_client.latest_frontier(settings)
    expected, expected_state = kafka_client.replayed(tmp_path, records, budget=BUDGET, step=STEP)
    assert len(live) > 300
    assert kafka_client.comparable(live) == kafka_client.comparable(expected)
    assert kafka_client.state(tmp_path / "state", budget=BUDGET) == expected_state


def test_switching_clients_keeps_offsets_state_and_keys(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path
) -> None:
    """Half the input with kafka-python, the rest with confluent-kafka on the same topics
    and state directory: the same as one uninterrupted replay."""
    records = kafka_client.events(400, seed=13)
    settings = kafka_client.settings(kafka_broker.bootstrap)
    kafka_client.produce(settings, kafka_client.avro(records[:200]))
    _run(settings, tmp_path / "state", "kafka-python")
    kafka_client.produce(settings, kafka_client.avro(records[200:]))
    _run(settings, tmp_path / "state", "confluent")
    expected, expected_state = kafka_client.replayed(tmp_path, records, budget=BUDGET, step=STEP)
    live = kafka_client.latest_frontier(settings)
    assert kafka_client.comparable(live) == kafka_client.comparable(expected)
    assert kafka_client.state(tmp_path / "state", budget=BUDGET) == expected_state


_CHILD = (
    CHILD_PRELUDE
    + """
import sys
from crash_hook import kill_at
from pathlib import Path
from frontierflow.connectors.kafka import KafkaSettings, KafkaTopics
from frontierflow.pipelines.embedded.live import LiveMetrics, LiveOptions, run_live
from frontierflow.pipelines.strategies import build_strategy
bootstrap, prefix, state, phase, nth = sys.argv[1:6]
topics = KafkaTopics(prefix + "-fetch-events", prefix + "-frontier", prefix + "-control",
                     prefix + "-dead")
settings = KafkaSettings(bootstrap, topics, group_id="g-" + prefix)
hook = kill_at(phase, int(nth))
options = LiveOptions(step_size=int(sys.argv[7]), exit_when_idle=True, kafka_client=sys.argv[8])
run_live(settings, build_strategy("ieca", budget=int(sys.argv[6])), Path(state), options,
         before_commit=hook)
"""
)


@pytest.mark.slow
@CLIENTS
def test_kill_9_at_twenty_points(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path, client: str
) -> None:
    records = kafka_client.events(600, seed=11)
    prefix = uuid.uuid4().hex[:10]
    settings = kafka_client.settings(kafka_broker.bootstrap, prefix)
    kafka_client.produce(settings, kafka_client.avro(records))
    state = tmp_path / "state"
    rng = random.Random(99)
    kills = 0
    while kills < 20:
        phase = rng.choice(["flushing", "flushed", "committed"])
        nth = rng.randrange(1, 3)
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _CHILD,
                kafka_broker.bootstrap,
                prefix,
                str(state),
                phase,
                str(nth),
                str(BUDGET),
                str(STEP),
                client,
            ],
            capture_output=True,
            timeout=300,
        )
        if done.returncode == 0:
            break  # the input ran out before this run reached its kill point
        assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
        kills += 1
    assert kills >= 15  # 600 events in steps of 25 leave room for most of the 20 kills
    _run(settings, state, client)
    expected, expected_state = kafka_client.replayed(tmp_path, records, budget=BUDGET, step=STEP)
    live = kafka_client.latest_frontier(settings)
    assert kafka_client.comparable(live) == kafka_client.comparable(expected)
    assert kafka_client.state(state, budget=BUDGET) == expected_state


@pytest.mark.slow
@CLIENTS
def test_broker_restart_mid_run(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path, client: str
) -> None:
    records = kafka_client.events(500, seed=5)
    settings = kafka_client.settings(kafka_broker.bootstrap)
    first, second = records[:250], records[250:]
    kafka_client.produce(settings, kafka_client.avro(first))
    distinct_first = len({r["url"] for r in first})
    progressed = threading.Event()
    stop = threading.Event()
    seen: list[int] = [0]

    def on_step(stats: EngineStats) -> None:
        seen[0] = stats.events
        if stats.events >= distinct_first:
            progressed.set()

    result: list[EngineStats] = []
    options = LiveOptions(
        step_size=STEP, retry_backoff_s=0.2, poll_timeout_ms=100, kafka_client=client
    )
    job = threading.Thread(
        target=lambda: result.append(
            run_live(
                settings,
                build_strategy("ieca", budget=BUDGET),
                tmp_path / "state",
                options,
                stop,
                on_step=on_step,
            )
        ),
        daemon=True,
    )
    job.start()
    assert progressed.wait(DEADLINE_S), "the job did not process the first half"
    kafka_broker.stop()
    kafka_broker.start()
    kafka_client.produce(settings, kafka_client.avro(second))
    total = len({r["url"] for r in records})
    wait_for(lambda: seen[0] >= total, "the job to resume after the broker restart", DEADLINE_S)
    stop.set()
    job.join(DEADLINE_S)
    assert not job.is_alive()
    expected, expected_state = kafka_client.replayed(tmp_path, records, budget=BUDGET, step=STEP)
    live = kafka_client.latest_frontier(settings)
    assert kafka_client.comparable(live) == kafka_client.comparable(expected)
    assert kafka_client.state(tmp_path / "state", budget=BUDGET) == expected_state


def _malformed(
    rng: random.Random, good: list[bytes], events: Callable[..., list[dict[str, Any]]]
) -> bytes | None:
    """One bad message of a random kind; `events(1, seed=...)` gives a valid base."""
    codec = AvroCodec.for_name("FetchEvent")
    base = events(1, seed=rng.randrange(10**6))[0]
    kind = rng.randrange(9)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
    if kind == 1:
        sample = rng.choice(good)
        return sample[: rng.randrange(1, len(sample))]  # truncated
    if kind == 2:
        sample = bytearray(rng.choice(good))
        sample[2:10] = bytes(8)  # unknown fingerprint
        return bytes(sample)
    if kind == 3:
        return json.dumps({k: v for k, v in base.items() if k != "url"}).encode()
    if kind == 4:
        return codec.encode(
            {
                **base,
                "url": rng.choice(
                    ["ftp://x/y", "mailto:a@b", "http://", "not a url", "https://h:99999/"]
                ),
            }
        )
    if kind == 5:
        return codec.encode({**base, "fetch_ms": rng.choice([math.nan, -1.0, math.inf])})
    if kind == 6:
        return codec.encode({**base, "bytes": -rng.randrange(1, 10**6)})
    if kind == 7:
        return codec.encode({**base, "outlinks": [f"https://o.example/{i}" for i in range(25_000)]})
    return b"{" + rng.choice(good)  # garbage that looks like JSON


@pytest.mark.slow
@CLIENTS
def test_fuzz_every_bad_message_is_a_dead_letter(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path, client: str
) -> None:
    rng = random.Random(3)
    records = kafka_client.events(300, seed=21)
    good = kafka_client.avro(records)
    bad = [_malformed(rng, good, kafka_client.events) for _ in range(2000)]
    mixed: list[bytes | None] = []
    g, b = iter(good), iter(bad)
    slots = ["g"] * len(good) + ["b"] * len(bad)
    rng.shuffle(slots)
    for slot in slots:
        mixed.append(next(g) if slot == "g" else next(b))
    settings = kafka_client.settings(kafka_broker.bootstrap)
    kafka_client.produce(settings, mixed)
    stats = _run(settings, tmp_path / "state", client)
    assert stats.dead_letters == len(bad)
    letters = kafka_client.read_topic(settings, settings.topics.dead_letter)
    assert len(letters) == len(bad)
    dead_codec = AvroCodec.for_name("DeadLetter")
    decoded = [dead_codec.decode(v) for _, v in letters if v is not None]
    assert sorted(d["raw"] for d in decoded) == sorted(x or b"" for x in bad)
    assert all(d["message"] for d in decoded)
    expected, expected_state = kafka_client.replayed(tmp_path, records, budget=BUDGET, step=STEP)
    live = kafka_client.latest_frontier(settings)
    assert kafka_client.comparable(live) == kafka_client.comparable(expected)
    assert kafka_client.state(tmp_path / "state", budget=BUDGET) == expected_state


def test_metrics_endpoint_counts_what_happened(
    kafka_broker: Any, kafka_client: Any, tmp_path: Path
) -> None:
    records = kafka_client.events(50, seed=2)
    settings = kafka_client.settings(kafka_broker.bootstrap)
    kafka_client.produce(settings, [*kafka_client.avro(records), b"\x00bad", b"{}"])
    metrics = LiveMetrics()
    options = LiveOptions(step_size=STEP, exit_when_idle=True, metrics_port=0)
    stats = run_live(
        settings,
        build_strategy("ieca", budget=BUDGET),
        tmp_path / "state",
        options,
        metrics=metrics,
    )
    assert metrics.port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/metrics", timeout=10) as r:
        text = r.read().decode()
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert values["frontierflow_events_total"] == stats.events == len({r["url"] for r in records})
    assert values['frontierflow_dead_letters_total{error_class="CodecError"}'] == 2
    assert values["frontierflow_frontier_entries_total"] == stats.entries > 0
    assert values["frontierflow_input_lag"] == 0
    assert values["frontierflow_state_keys"] > 0
    assert values["frontierflow_step_seconds_count"] >= 1
