"""The unbounded form on the Flink session cluster, Kafka → Beam → Kafka, reading through
Java's KafkaIO (`beam.kafka_io`): the form that Flink streams (a Python source's watermark
does not reach Flink's streaming runner, see RESULTS).

A recorded two-cycle LAFC crawl (reply requests, answers without download, tombstones) is
produced to fetch-events in two halves. The job runs at parallelism 2 on both TaskManagers
with Flink checkpoints every 2 s (RocksDB state backend; the form adds
`--finish_bundle_before_checkpointing`: a checkpoint that caught a bundle open lost its
records at the next grouping, RESULTS).
Once the first half's frontier has reached Kafka and a checkpoint has completed,
TaskManager 1 is killed with SIGKILL and a fresh one started, as a supervisor would. The
job must restore its last completed checkpoint (Beam state and KafkaIO's offsets, not a
restart from nothing), and the frontier it writes must end up, partition by partition,
exactly what the live embedded engine writes for the same topic: nothing lost, and what
is sent again after the restore is the same upsert (the form is deterministic in its
input's append times). LAFC never reads the crawl clock, so the result does not depend on
how arrivals fall into clock windows. The job also runs the crawl-speed controller: its
ScalingDecisions on fetcher-control must be the engine's, each fetcher's in order (one
sent again after a restore counts once).

Scheduled revisits (`--revisit`) run on the cluster too: a breadth-first crawl of the news
site gives the live engine's frontier, each page's next visit included.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
from flink_cluster import FlinkCluster
from lafc_recording import (
    FRONTIER_PARTITIONS,
    SPEED,
    decisions_per_fetcher,
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
RESTORE_S = 240.0  # the kill noticed, a fresh TaskManager, the restore, the rest
CHECKPOINT_INTERVAL = "2 s"


def _checkpointing_conf(folder: Path) -> Path:
    """A Flink configuration folder for the job (`--flink_conf_dir`) that turns on Flink's
    periodic checkpoints."""
    folder.mkdir()
    (folder / "config.yaml").write_text(
        f"execution.checkpointing.interval: {CHECKPOINT_INTERVAL}\n"
    )
    return folder


def _checkpoints(cluster: FlinkCluster, jid: str) -> dict[str, Any]:
    return cluster.rest(f"/jobs/{jid}/checkpoints")


def _a_completed_checkpoint(cluster: FlinkCluster, jid: str) -> int:
    """The job's count of completed checkpoints, once it is at least one. From then on no
    task of the job is still starting or closing (Beam's Impulse sources end after their
    one element), so none declines a savepoint."""
    return wait_for(
        lambda: _checkpoints(cluster, jid)["counts"]["completed"],
        "a completed checkpoint",
        JOB_S,
        0.5,
    )


def _running_job(cluster: FlinkCluster, before: dict[str, str]) -> str | None:
    new = [j for j, state in cluster.jobs().items() if j not in before and state == "RUNNING"]
    return new[0] if len(new) == 1 else None


def _submit(
    settings: Any,
    cluster: FlinkCluster,
    worker_pool: str,
    expansion_jar: Path,
    conf_dir: Path,
    *more: str,
) -> tuple[Any, str]:
    """Submit the unbounded LAFC form at parallelism 2 with checkpoints on; (the runner's
    result, the cluster's job id) once the job runs."""
    return _submit_stream(
        settings,
        cluster,
        worker_pool,
        expansion_jar,
        [f"--flink_conf_dir={conf_dir}", *more],
        strategy_name="lafc",
        budget=1000,
        strategy=lafc(),
        speed=SPEED,
    )


def _submit_stream(
    settings: Any,
    cluster: FlinkCluster,
    worker_pool: str,
    expansion_jar: Path,
    more: list[str],
    **form: Any,
) -> tuple[Any, str]:
    """Submit the unbounded form (`form`: its strategy and options) through KafkaIO at
    parallelism 2, clock windows of a second; (the runner's result, the cluster's job id)
    once the job runs."""
    before = cluster.jobs()
    result = run_beam_kafka_stream(
        settings,
        windows=ClockWindows(1000),
        beam_args=[
            *cluster.beam_args(worker_pool, 2),
            "--streaming",  # `--finish_bundle_before_checkpointing`: added by the form
            *more,
        ],
        until_current_end=False,
        kafka_io=str(expansion_jar),
        wait=False,
        **form,
    )
    try:
        jid = wait_for(lambda: _running_job(cluster, before), "the job to run", JOB_S, 0.5)
    except BaseException:
        with contextlib.suppress(Exception):
            result.cancel()
        raise
    return result, jid


def _frontier_diff(
    actual: dict[int, dict[bytes, bytes | None]], expected: dict[int, dict[bytes, bytes | None]]
) -> str:
    """What separates two frontiers, for a failure message: keys missing, extra, or with
    another value, a few of each."""
    missing, extra, other = [], [], []
    for p in sorted(set(actual) | set(expected)):
        got, want = actual.get(p, {}), expected.get(p, {})
        missing += [(p, k) for k in want if k not in got]
        extra += [(p, k) for k in got if k not in want]
        other += [(p, k, got[k], want[k]) for k in want if k in got and got[k] != want[k]]
    return (
        f"{len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}, "
        f"{len(other)} other values {other[:3]}"
    )


def _wait_for_frontier(beam_side: Any, expected: Any, what: str) -> None:
    """Wait until the Beam side's frontier, partition by partition, is `expected`; a
    timeout says what separates them."""
    try:
        wait_for(lambda: frontier_per_partition(beam_side) == expected, what, RESTORE_S, 1.0)
    except AssertionError as timeout:
        diff = _frontier_diff(frontier_per_partition(beam_side), expected)
        raise AssertionError(f"{timeout}: {diff}") from None


def _engine_frontier(engine: Any, tmp_path: Path) -> dict[int, dict[bytes, bytes | None]]:
    """The live embedded engine (LAFC) run over `engine`'s topics to their end: its
    frontier per partition, what the Beam side must equal."""
    run_live(
        engine,
        lafc(),
        tmp_path / "live",
        LiveOptions(step_size=7, exit_when_idle=True, retry_backoff_s=0.2, speed=SPEED),
    )
    return frontier_per_partition(engine)


def _wait_for_the_engines_decisions(engine: Any, beam_side: Any) -> None:
    """The Beam form's ScalingDecisions come to equal the live engine's (which has run to
    the end of the topic): 8 windows of 20 ms closed by the recording's one fetcher."""
    expected = decisions_per_fetcher(engine)
    assert [len(d) for d in expected.values()] == [8]
    try:
        wait_for(
            lambda: decisions_per_fetcher(beam_side) == expected,
            "the Beam form's ScalingDecisions to equal the embedded engine's",
            RESTORE_S,
            1.0,
        )
    except AssertionError as timeout:
        got = decisions_per_fetcher(beam_side)
        raise AssertionError(f"{timeout}: {got} against {expected}") from None


def _end(cluster: FlinkCluster, result: Any, jid: str) -> None:
    with contextlib.suppress(Exception):  # the runner's own cancel may not reach it
        result.cancel()
    if cluster.jobs().get(jid) not in ("CANCELED", "FAILED", "FINISHED"):
        cluster.cancel_job(jid)


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

    result, jid = _submit(
        beam_side,
        flink_cluster,
        flink_worker_pool,
        kafka_expansion_jar,
        _checkpointing_conf(tmp_path / "flink-conf"),
    )
    try:
        first = wait_for(
            lambda: sum(map(len, frontier_per_partition(beam_side).values())),
            "the first half's frontier on Kafka",
            JOB_S,
            0.5,
        )
        completed = _a_completed_checkpoint(flink_cluster, jid)
        flink_cluster.kill_taskmanager(1)
        flink_cluster.start_taskmanager(1)  # returns once it has registered
        kafka_client.produce(engine, avro[half:])

        expected = _engine_frontier(engine, tmp_path)
        wait_for(
            lambda: frontier_per_partition(beam_side) == expected,
            "the Beam frontier to equal the embedded engine's",
            RESTORE_S,
            1.0,
        )
        _wait_for_the_engines_decisions(engine, beam_side)
        # the kill reached the job: it failed over, restored its last completed checkpoint
        # (state and Kafka offsets, not a restart from nothing), and it is running again
        exceptions = flink_cluster.rest(f"/jobs/{jid}/exceptions")["exceptionHistory"]
        assert exceptions["entries"], "the job saw no failure: the kill missed it"
        checkpoints = _checkpoints(flink_cluster, jid)
        assert completed >= 1
        assert checkpoints["counts"]["restored"] >= 1
        assert checkpoints["latest"]["restored"] is not None
        assert not checkpoints["latest"]["restored"]["is_savepoint"]
        assert flink_cluster.jobs()[jid] == "RUNNING"
        total = sum(map(len, expected.values()))
        assert 0 < first < total  # the kill came mid-stream
        assert set(expected) == set(range(FRONTIER_PARTITIONS))
    finally:
        _end(flink_cluster, result, jid)


def test_stop_with_a_savepoint_and_resume_equals_an_uninterrupted_run(
    kafka_broker: Any,
    kafka_client: Any,
    flink_cluster: FlinkCluster,
    flink_worker_pool: str,
    kafka_expansion_jar: Path,
    tmp_path: Path,
) -> None:
    """The first half is read and written; the job is stopped with a savepoint (its Beam
    state and KafkaIO's offsets; `cluster.sh stop-job`, a savepoint that cancels the job:
    Flink's own stop-with-savepoint drains a Beam job first, so the savepoint would hold
    none of what waits for a timer); the second half is produced while no job runs; the
    same pipeline submitted with `--savepoint_path` resumes there. The frontier must end
    up what the live embedded engine writes for the whole topic, as if never stopped."""
    events = recorded_crawl()
    half = len(events) // 2
    engine, beam_side = engine_and_beam_settings(kafka_client.settings(kafka_broker.bootstrap))
    avro = kafka_client.avro([e.to_avro() for e in events])
    kafka_client.produce(engine, avro[:half])
    conf = _checkpointing_conf(tmp_path / "flink-conf")

    result, jid = _submit(beam_side, flink_cluster, flink_worker_pool, kafka_expansion_jar, conf)
    try:
        first = wait_for(
            lambda: sum(map(len, frontier_per_partition(beam_side).values())),
            "the first half's frontier on Kafka",
            JOB_S,
            0.5,
        )
        _a_completed_checkpoint(flink_cluster, jid)  # `stop-job` retries a declined one too
        savepoint = flink_cluster.stop_job(jid)
    finally:
        _end(flink_cluster, result, jid)
    assert savepoint.startswith("file:")
    kafka_client.produce(engine, avro[half:])
    expected = _engine_frontier(engine, tmp_path)
    total = sum(map(len, expected.values()))
    assert 0 < first < total  # stopped mid-stream

    result, jid = _submit(
        beam_side,
        flink_cluster,
        flink_worker_pool,
        kafka_expansion_jar,
        conf,
        f"--savepoint_path={savepoint}",
    )
    try:
        _wait_for_frontier(
            beam_side, expected, "the resumed frontier to equal the embedded engine's"
        )
        _wait_for_the_engines_decisions(engine, beam_side)
        restored = _checkpoints(flink_cluster, jid)["latest"]["restored"]
        assert restored is not None and restored["is_savepoint"]
        assert restored["external_path"] == savepoint
    finally:
        _end(flink_cluster, result, jid)


def test_revisits_on_the_cluster_equal_the_live_engines(
    kafka_broker: Any,
    kafka_client: Any,
    flink_cluster: FlinkCluster,
    flink_worker_pool: str,
    kafka_expansion_jar: Path,
    tmp_path: Path,
) -> None:
    """`--revisit fixed:20m` on the cluster: a breadth-first crawl of the news site (the
    fleet tests' news-site fetcher, a download every 10 s, its revisits answered) read
    through KafkaIO at parallelism 2. The frontier, each page's revisit entry and its
    `not_before` included, must end up, partition by partition, what the live embedded
    engine writes for the same topic. Breadth-first reads no crawl clock, and the schedule
    depends only on each host's answers in input order, so arrival windows do not change
    it."""
    from news_recording import crawl_news

    from frontierflow.pipelines.strategies import build_strategy
    from frontierflow.state.revisit_schedule import parse_revisit

    fixed = parse_revisit("fixed:20m")
    crawl = crawl_news(tmp_path, "fixed:20m", budget=100, days=0.05)
    engine, beam_side = engine_and_beam_settings(kafka_client.settings(kafka_broker.bootstrap))
    kafka_client.produce(engine, kafka_client.avro([e.to_avro() for e in crawl.events]))
    options = LiveOptions(step_size=7, exit_when_idle=True, retry_backoff_s=0.2, revisit=fixed)
    run_live(engine, build_strategy("bfs", budget=100), tmp_path / "live", options)
    expected = frontier_per_partition(engine)
    assert sum(map(len, expected.values())) > 10  # one host: one partition

    result, jid = _submit_stream(
        beam_side,
        flink_cluster,
        flink_worker_pool,
        kafka_expansion_jar,
        [],
        strategy_name="bfs",
        budget=100,
        revisit=fixed,
    )
    try:
        _wait_for_frontier(beam_side, expected, "the Beam frontier to equal the embedded engine's")
    finally:
        _end(flink_cluster, result, jid)
