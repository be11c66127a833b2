"""The unbounded form on the Flink session cluster, Kafka → Beam → Kafka, reading through
Java's KafkaIO (`beam.kafka_io`): the form that Flink streams (a Python source's watermark
does not reach Flink's streaming runner, see RESULTS).

A recorded two-cycle LAFC crawl (reply requests, answers without download, tombstones) is
produced to fetch-events in two halves. The job runs at parallelism 2 on both TaskManagers;
after the first half's frontier has reached Kafka, TaskManager 1 is killed with SIGKILL and
a fresh one started, as a supervisor would. The job takes no checkpoints (with Flink
checkpoints on, the 2.62 job server's pipeline stops emitting: RESULTS), so Flink restarts
it from nothing: KafkaIO reads every partition from its start again into empty state. The
frontier it writes must end up, partition by partition, exactly what the live embedded
engine writes for the same topic: nothing lost, and what the restart sends again is the
same upsert (the form is deterministic in its input's append times). LAFC never reads the
crawl clock, so the result does not depend on how arrivals fall into clock windows.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from flink_cluster import FlinkCluster
from lafc_recording import (
    FRONTIER_PARTITIONS,
    engine_and_beam_settings,
    frontier_per_partition,
    lafc,
    recorded_crawl,
)
from polling import wait_for

from frontierflow.pipelines.beam.event_time import ClockWindows
from frontierflow.pipelines.beam.kafka import run_beam_kafka_stream
from frontierflow.pipelines.embedded.live import LiveOptions, run_live

pytestmark = [pytest.mark.kafka, pytest.mark.beam_runner, pytest.mark.slow]

JOB_S = 240.0  # submission (the job server uploads its jars) and the first outputs
RESTORE_S = 240.0  # the kill noticed, a fresh TaskManager, the restart, the rest


def _running_job(cluster: FlinkCluster, before: dict[str, str]) -> str | None:
    new = [j for j, state in cluster.jobs().items() if j not in before and state == "RUNNING"]
    return new[0] if len(new) == 1 else None


def test_stream_on_the_cluster_survives_a_killed_taskmanager(
    kafka_broker: Any,
    kafka_client: Any,
    flink_cluster: FlinkCluster,
    flink_worker_pool: str,
    kafka_expansion_jar: Path,
    tmp_path: Path,
) -> None:
    events = recorded_crawl()
    half = len(events) // 2
    engine, beam_side = engine_and_beam_settings(kafka_client.settings(kafka_broker.bootstrap))
    avro = kafka_client.avro([e.to_avro() for e in events])
    kafka_client.produce(engine, avro[:half])

    before = flink_cluster.jobs()
    result = run_beam_kafka_stream(
        beam_side,
        strategy_name="lafc",
        budget=1000,
        windows=ClockWindows(1000),
        beam_args=[
            *flink_cluster.beam_args(flink_worker_pool, 2),
            "--streaming",
        ],
        until_current_end=False,
        strategy=lafc(),
        kafka_io=str(kafka_expansion_jar),
        wait=False,
    )
    jid = None
    try:
        jid = wait_for(lambda: _running_job(flink_cluster, before), "the job to run", JOB_S, 0.5)
        first = wait_for(
            lambda: sum(map(len, frontier_per_partition(beam_side).values())),
            "the first half's frontier on Kafka",
            JOB_S,
            0.5,
        )
        flink_cluster.kill_taskmanager(1)
        flink_cluster.start_taskmanager(1)  # returns once it has registered
        kafka_client.produce(engine, avro[half:])

        run_live(
            engine,
            lafc(),
            tmp_path / "live",
            LiveOptions(step_size=7, exit_when_idle=True, retry_backoff_s=0.2),
        )
        expected = frontier_per_partition(engine)
        wait_for(
            lambda: frontier_per_partition(beam_side) == expected,
            "the Beam frontier to equal the embedded engine's",
            RESTORE_S,
            1.0,
        )
        # the kill reached the job: it failed over and restarted, and it is running again
        exceptions = flink_cluster.rest(f"/jobs/{jid}/exceptions")["exceptionHistory"]
        assert exceptions["entries"], "the job saw no failure: the kill missed it"
        assert flink_cluster.jobs()[jid] == "RUNNING"
        total = sum(map(len, expected.values()))
        assert 0 < first < total  # the kill came mid-stream
        assert set(expected) == set(range(FRONTIER_PARTITIONS))
    finally:
        with contextlib.suppress(Exception):  # the runner's own cancel may not reach it
            result.cancel()
        if jid is not None and flink_cluster.jobs().get(jid) not in ("CANCELED", "FAILED"):
            flink_cluster.cancel_job(jid)
