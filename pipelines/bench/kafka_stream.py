"""`frontierflow bench-kafka --beam-stream RUNNER`: the unbounded Beam form, Kafka → Beam →
Kafka, beside the live embedded engine on the same events.

N generated FetchEvents (as `frontierflow bench` makes them) are produced first to one
fetch-events topic, stamped on arrival (LogAppendTime, as the form requires). Then, each in
a process of its own and writing a frontier topic of its own:

1. the embedded engine, `frontierflow run --exit-when-idle` (IECA, RocksDB, the default
   crawl-speed controller), timed as `bench-kafka` times it (from its first frontier
   record to its last);
2. the Beam form, `frontierflow run --runner beam --clock windowed:W --kafka-io JAR` on the
   runner (`--streaming`, the SDK's state cache on; the same controller, its
   ScalingDecisions to a fetcher-control topic of its own), reading a fetch-events topic of its
   own that is filled in two steps: the first `STARTUP_EVENTS` events, then, once its
   frontier topic, compacted, holds the live keys the engine's held after those (the
   fixed cost: job server start, upload, the first windows' wait for the watermark), the
   rest; the net time runs from producing the rest until the frontier holds the same live
   keys as the engine's after all of them: the same pages discovered and not yet fetched
   (IECA's priorities may differ within the windowed clock's staleness bound, so only keys
   are compared). One job for both, so the start-up's wide swings on a shared machine
   stay out of the net time. It reads on, so it is stopped then, with the job server it
   started (its own process group), and on a session cluster its job is cancelled through
   the cluster's REST API (the cluster keeps a job whose submitter is gone).
3. the events/s of the Beam form: the rest over the net time (it includes the last
   window's wait for the watermark). Both forms are timed by their own records' Kafka
   timestamps; the Beam form's frontier topic is read only once it has not grown for
   `frontier_match.QUIET_S` (`FrontierWatch`: the time is that of the record after which
   the topic held the expected keys), so the bench's consumer, ~13 s of CPU per million
   records, shares
   the machine with the job it times only when the form rests that long at work (it says
   so on stderr);
4. latency, as `bench-kafka` measures the embedded engine's (`bench.kafka.produce_paced`):
   to the Beam job, still running, pages never fetched before are produced at half its net
   rate (or at `latency_rate`) for `latency_seconds`, each fetched at its send; latency is
   a frontier entry's Kafka timestamp minus its `emitted_at` (its event's send), until
   every paced page's removal is out. Then the same paced load, at the same rate, to a
   fresh embedded job.
   The Beam form's latency is at least one clock window plus KafkaIO's idle-watermark
   delay (two seconds once a partition has no backlog) by construction. On a session
   cluster, each vertex's input watermark lag is sampled during the paced load
   (`bench.flink_rest.WatermarkLags`): where a window waits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from kafka import KafkaConsumer

from frontierflow.connectors.kafka import KafkaSettings
from frontierflow.pipelines.bench.beam import FLINK_PARALLELISM, beam_args
from frontierflow.pipelines.bench.engine import BenchSetup, generated_events
from frontierflow.pipelines.bench.flink_rest import WatermarkLags, cancel_job, cluster_jobs
from frontierflow.pipelines.bench.frontier_match import (
    FrontierMatch,
    FrontierWatch,
    live_keys,
)
from frontierflow.pipelines.bench.kafka import (
    LATENCY_URL,
    KafkaBenchSetup,
    by_send_time,
    entry_latency,
    fresh_settings,
    paced_latency,
    percentiles,
    produce_events,
    produce_paced,
    timed_job,
)
from frontierflow.schemas.codecs import AvroCodec

STREAM_RUNNERS = ("flink", "flink-cluster", "flink-cluster-2")
STARTUP_EVENTS = 10
STOP_S = 30
STATE_CACHE_MB = 256
"""`--max_cache_memory_usage_mb` of the Beam run: the SDK's user-state cache, off by default."""


@dataclass(frozen=True, slots=True)
class StreamBenchSetup:
    bootstrap_servers: str
    runner: str
    flink_jar: str
    expansion: str
    """The KafkaIO expansion service: its launcher jar (started for the job) or the
    HOST:PORT of one kept running (`infra/flink/job-server.sh`)."""
    events: int = 2_000
    outlinks: int = 30
    urls: int = 200_000
    links: str = "zipf"
    step_size: int = 500
    window_ms: int = 1_000
    timeout_s: float = 1_800.0
    latency_seconds: float = 60.0
    latency_rate: float | None = None
    """Events/s of the paced load; None: half the form's own net rate."""
    flink_conf_dir: str | None = None
    flink_master: str | None = None
    worker_pool: str | None = None
    job_endpoint: str | None = None
    """HOST:PORT of a job server kept running (`infra/flink/job-server.sh`); None: the
    job starts one from `flink_jar`."""
    fetch_partitions: int | None = None
    """Partitions of each run's fetch-events topic (the engine's and the form's); None: the
    job's parallelism (`bench.beam.FLINK_PARALLELISM`). KafkaIO gives each source subtask
    its share of the partitions, and the step chained to it (decoding and checking the
    records) runs in that subtask's SDK worker: a topic of one partition decodes every
    event in one worker."""

    def __post_init__(self) -> None:
        if self.runner not in STREAM_RUNNERS:
            raise ValueError(f"--beam-stream: one of {', '.join(STREAM_RUNNERS)}")
        if self.latency_rate is not None and self.latency_rate <= 0:
            raise ValueError(f"--latency-rate must be > 0: {self.latency_rate}")
        if self.fetch_partitions is not None and self.fetch_partitions < 1:
            raise ValueError(f"--fetch-partitions must be >= 1: {self.fetch_partitions}")
        if self.events <= STARTUP_EVENTS:
            raise ValueError(f"--events must be > {STARTUP_EVENTS} (the start-up run's)")

    @property
    def partitions(self) -> int:
        """The fetch-events topics' partitions."""
        return self.fetch_partitions or FLINK_PARALLELISM[self.runner]


def kafka_expansion_jar(job_server_jar: str) -> Path:
    """The KafkaIO expansion service `infra/flink/fetch-job-server.sh` assembles beside an
    assembled job-server launcher (`…-launcher.jar` → `…-kafka-expansion-launcher.jar`)."""
    if not job_server_jar.endswith("-launcher.jar"):
        raise ValueError(f"{job_server_jar}: not an assembled job-server launcher")
    return Path(job_server_jar[: -len("-launcher.jar")] + "-kafka-expansion-launcher.jar")


@dataclass(frozen=True, slots=True)
class StreamRun:
    seconds: float
    """From submission until the frontier topic held the expected live keys."""
    startup_s: float
    """From submission until it held those of the first `STARTUP_EVENTS` events."""
    net_s: float
    """From producing the rest until it held the expected live keys (by the timestamp of
    the record after which it did)."""
    first_output_s: float
    records: int
    latency_rate: float
    """Events/s of the paced load the latencies were measured at."""
    latencies: list[int]
    """ms from an event's send to a frontier entry it gave, sorted."""
    latency_by_send: list[float] = field(default_factory=list)
    """The median latency of each third of the paced load, in send order (`by_send_time`)."""
    watermark_lags: list[str] = field(default_factory=list)
    """On a session cluster: each vertex's input watermark lag during the paced load."""


def run_stream_bench(setup: StreamBenchSetup) -> str:
    gen = BenchSetup(
        events=setup.events, outlinks=setup.outlinks, urls=setup.urls, links=setup.links
    )
    codec = AvroCodec.for_name("FetchEvent")
    seen = np.zeros(setup.urls, dtype=np.bool_)
    values = [codec.encode(e) for e in generated_events(gen, seed=1, seen=seen)]
    distinct = int(seen.sum())  # pages and link targets: every one gets a state
    del seen
    with tempfile.TemporaryDirectory() as tmp:
        engine: dict[str, tuple[float, set[bytes]]] = {}
        for label, batch in (("startup", values[:STARTUP_EVENTS]), ("full", values)):
            job = fresh_settings(setup.bootstrap_servers, setup.partitions)
            produce_events(job, batch)
            seconds, _ = timed_job(job, Path(tmp) / f"state-{label}", setup.step_size, len(batch))
            engine[label] = (seconds, live_keys(setup.bootstrap_servers, job.topics.frontier))
        full = _beam_run(
            setup,
            fresh_settings(setup.bootstrap_servers, setup.partitions),
            (values[:STARTUP_EVENTS], engine["startup"][1]),
            (values[STARTUP_EVENTS:], engine["full"][1]),
            Path(tmp) / "beam.log",
        )
        engine_latencies = sorted(
            paced_latency(
                KafkaBenchSetup(
                    setup.bootstrap_servers,
                    step_size=setup.step_size,
                    latency_seconds=setup.latency_seconds,
                ),
                Path(tmp) / "state-latency",
                full.latency_rate,
                values,
            )
        )
    engine_s = engine["full"][0]
    engine_rate = setup.events / engine_s
    beam_rate = (setup.events - STARTUP_EVENTS) / full.net_s
    gross_rate = setup.events / full.seconds
    return "\n".join(
        [
            f"{setup.events:,} FetchEvents ({setup.outlinks} outlinks each, drawn "
            f"{'by popularity' if setup.links == 'zipf' else 'uniformly'} from "
            f"{setup.urls:,} URLs) through one broker, fetch-events topics of "
            f"{setup.partitions} partition{'s' if setup.partitions > 1 else ''}; "
            f"Beam on {setup.runner}, clock "
            f"windows of {setup.window_ms} ms",
            f"{distinct:,} distinct URLs (pages and links), each with a state at the end",
            f"{'run':<40}{'seconds':>9}{'events/s':>10}{'ratio':>8}",
            f"{'frontierflow run (embedded, ieca)':<40}{engine_s:>9.1f}{engine_rate:>10,.0f}"
            f"{1:>8.3f}",
            f"{'Beam stream, to an equal frontier':<40}{full.seconds:>9.1f}"
            f"{gross_rate:>10,.1f}{gross_rate / engine_rate:>8.4f}",
            f"{'Beam stream, first ' + str(STARTUP_EVENTS) + ' events (fixed cost)':<40}"
            f"{full.startup_s:>9.1f}",
            f"{'Beam stream, the rest (net)':<40}{full.net_s:>9.1f}{beam_rate:>10,.1f}"
            f"{beam_rate / engine_rate:>8.4f}",
            _latency_line("Beam stream", full.latency_rate, full.latencies),
            "  its p50 by send time, each third of the paced load: "
            + ", ".join(f"{p50:,.0f} ms" for p50 in full.latency_by_send)
            + pace_note(full.latency_by_send),
            _latency_line("embedded", full.latency_rate, engine_latencies),
            *full.watermark_lags,
            f"Beam: first frontier record after {full.first_output_s:.1f} s, "
            f"{full.records:,} records in all (one per URL and clock window it changed in)",
            "embedded: from its first frontier record to its last (bench-kafka's measure); "
            "ratio: events/s over the embedded engine's",
            *(
                [
                    "note: the SDK workers of an EXTERNAL pool ignore the pipeline's state "
                    "cache size: start infra/flink/worker_pool.py with "
                    f"--max_cache_memory_usage_mb={STATE_CACHE_MB} (its default, 0, is no cache)"
                ]
                if setup.runner == "flink-cluster-2"
                else []
            ),
        ]
    )


def pace_note(medians: list[float]) -> str:
    """The last third's median against the first's: a rise means the queue grew while the
    paced load ran (the job fell behind the pace); level or falling, it kept up."""
    if len(medians) < 2:
        return ""
    change = medians[-1] - medians[0]
    return f" (last minus first: {change:+,.0f} ms; a rise means the job fell behind)"


def _latency_line(label: str, rate: float, latencies: list[int]) -> str:
    p50, p99 = percentiles(latencies)
    return (
        f"latency produce -> frontier entry, {label}, at {rate:,.1f} events/s: "
        f"p50 {p50:,.0f} ms, p99 {p99:,.0f} ms ({len(latencies):,} entries)"
    )


def _beam_run(
    setup: StreamBenchSetup,
    job: KafkaSettings,
    startup: tuple[list[bytes], set[bytes]],
    rest: tuple[list[bytes], set[bytes]],
    log: Path,
) -> StreamRun:
    """Submit the form over `job`'s fetch-events, holding the `startup` events, and time it
    to their expected live keys; then produce the `rest` and time it to theirs. The
    submitting process's output goes to `log`, whose end a failure quotes."""
    t = job.topics
    produce_events(job, startup[0])
    options = beam_args(
        setup.runner,
        None,
        setup.flink_jar,
        setup.flink_conf_dir,
        setup.flink_master,
        setup.worker_pool,
        setup.job_endpoint,
    )
    command = [
        sys.executable,
        "-m",
        "frontierflow.pipelines.cli",
        "run",
        "--bootstrap-servers",
        setup.bootstrap_servers,
        "--strategy",
        "ieca",
        "--topic-fetch-events",
        t.fetch_events,
        "--topic-frontier",
        t.frontier,
        "--topic-fetcher-control",
        t.fetcher_control,
        "--topic-dead-letter",
        t.dead_letter,
        "--runner",
        "beam",
        "--clock",
        f"windowed:{setup.window_ms}",
        "--kafka-io",
        setup.expansion,
        *[f"--beam-option={o}" for o in options],
        "--beam-option=--streaming",
        f"--beam-option=--max_cache_memory_usage_mb={STATE_CACHE_MB}",
    ]
    cluster = setup.flink_master if setup.runner.startswith("flink-cluster") else None
    before = cluster_jobs(cluster) if cluster else set()
    lags = WatermarkLags(cluster, before) if cluster else None
    started, started_at = time.monotonic(), time.time()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    consumer = KafkaConsumer(
        bootstrap_servers=setup.bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )

    def check(match: FrontierMatch) -> None:
        if time.monotonic() - started > setup.timeout_s:
            raise TimeoutError(
                f"the Beam frontier held {len(match.live):,} keys, {match.missing:,} of "
                f"the {len(match.expected):,} expected missing, after {setup.timeout_s:.0f} s"
            )
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-15:]
            raise RuntimeError(
                f"the Beam job ended ({proc.returncode}) before its frontier:\n" + "\n".join(tail)
            )

    watch = FrontierWatch(consumer, t.frontier, startup[1], check)
    match = watch.match

    def until(expected: set[bytes]) -> float:
        return watch.until(expected, "Beam form")

    def until_fetched(count: int, since_ms: int) -> list[tuple[int, int]]:
        """(send time, latency) of the entries emitted since `since_ms`, until the frontier
        holds a removal of each of the `count` paced pages (their fetches took effect)."""
        latencies: list[tuple[int, int]] = []
        removed = 0
        deadline = time.monotonic() + setup.timeout_s
        while removed < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{removed:,} of {count:,} paced pages fetched")
            for batch in consumer.poll(timeout_ms=500).values():
                for record in batch:
                    if record.value is None:
                        removed += LATENCY_URL.encode() in record.key
                    elif (
                        lat := entry_latency(record.timestamp, record.value, since_ms)
                    ) is not None:
                        latencies.append((record.timestamp - lat, lat))
        return latencies

    try:
        startup_s = until(startup[1]) - started_at
        rest_at = time.time()
        produce_events(job, rest[0])
        done_at = until(rest[1])
        seconds, net_s = done_at - started_at, done_at - rest_at
        read = time.monotonic()
        print(  # a long run's result before its latency phase
            f"Beam form: the engine's frontier after {seconds:.1f} s, {startup_s:.1f} s of "
            f"them the fixed cost; {match.records:,} records, read by the bench "
            f"{read - started - seconds:.1f} s after the match",
            file=sys.stderr,
            flush=True,
        )
        # the live keys can match while stages still work through the rest (priority
        # updates of known pages): one page more, produced after the rest, leaves only
        # once every stage has taken the windows before it, so the paced load meets a
        # drained job (as `paced_latency` gives the embedded engine)
        produce_paced(job, rest[0][-1:], 1.0, 1.0)
        until_fetched(1, int(time.time() * 1000))
        print(
            f"Beam form: drained {time.monotonic() - read:.1f} s after the bench read it",
            file=sys.stderr,
            flush=True,
        )
        rate = setup.latency_rate or len(rest[0]) / (seconds - startup_s) / 2
        if lags:
            lags.start()
        since_ms = int(time.time() * 1000)
        count = produce_paced(job, rest[0], rate, setup.latency_seconds)
        sent = until_fetched(count, since_ms)
        if lags:
            lags.stop()
        assert match.first_ms is not None  # the frontier held the expected keys
        return StreamRun(
            seconds,
            startup_s,
            net_s,
            match.first_ms / 1000 - started_at,
            match.records,
            rate,
            sorted(latency for _, latency in sent),
            by_send_time(sent),
            lags.lines() if lags else [],
        )
    finally:
        if lags:
            lags.stop()
        consumer.close()
        _stop_group(proc)
        if cluster:  # a session cluster keeps a job its submitter left: cancel it
            for job_id in cluster_jobs(cluster) - before:
                cancel_job(cluster, job_id)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop the submitting process, then whatever else of its process group is left (the
    job server it started, which otherwise outlives it)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STOP_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
