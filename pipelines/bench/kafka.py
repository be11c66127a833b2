"""`frontierflow bench kafka`: Kafka → frontierflow → Kafka against the embedded replay of
the same events and against each Kafka client's no-work ceiling.

Measurements on one broker, in one run, each on topics of its own:

1. the replay: `frontierflow replay` of the same N FetchEvents from a log file (IECA,
   RocksDB state, the default crawl-speed controller as the live job runs it, its own
   process), the rate the live job should approach;
2. throughput, per Kafka client (`--kafka-client`, repeatable): N FetchEvents are produced
   first, then `frontierflow run --exit-when-idle --kafka-client C` (IECA, RocksDB state,
   its own process) drains them; events/s and entries/s are counted between its first and
   last committed step;
3. ceiling, per client: the client alone (through the same reader and writer as the job)
   consumes the same N events and produces the same output records the job wrote (copied
   from its frontier topic), doing no other work;
4. latency, per client: events produced at half the measured throughput to a job already
   running; latency = the frontier record's Kafka timestamp (set by the job's producer when
   it sends) minus the event's `fetched_at` (set by the bench's producer when it sends).

The ratio to the replay is the one to read: it compares the same work, while the ratio to a
ceiling moves with the number of records each event makes.

With `--ui` it measures instead what the operator's page costs (`bench.kafka_page`).
"""

from __future__ import annotations

import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from frontierflow.connectors.kafka import (
    KafkaSettings,
    KafkaTopics,
    ensure_topics,
    open_admin,
    open_reader,
    open_writer,
)
from frontierflow.connectors.kafka_client import TopicSpec, resolve_client
from frontierflow.pipelines.bench.engine import (
    JOB_RUN,
    BenchSetup,
    generate_log,
    generated_events,
    spawn_bench_worker,
)
from frontierflow.schemas.codecs import AvroCodec

REPLAY_TARGET = 0.8
"""The live job's events/s over the embedded replay's on the same events."""


@dataclass(frozen=True, slots=True)
class KafkaBenchSetup:
    bootstrap_servers: str
    events: int = 10_000
    outlinks: int = 30
    urls: int = 200_000
    step_size: int = 500
    latency_seconds: float = 15.0
    ui_repeats: int = 3
    """With `run_ui_bench`: runs of each kind (without and with the page), alternating."""
    clients: tuple[str, ...] = ("auto",)
    """The Kafka clients the job runs with, each measured in turn (`run_ui_bench`: the
    first)."""

    def __post_init__(self) -> None:
        if self.events < 1 or self.latency_seconds <= 0 or self.ui_repeats < 1:
            raise ValueError("events, latency seconds and repeats must be positive")
        if not self.clients:
            raise ValueError("at least one Kafka client")
        for client in self.clients:
            resolve_client(client)  # refuses an unknown or missing one before any run


@dataclass(frozen=True, slots=True)
class _ClientRun:
    client: str
    seconds: float
    entries: int
    ceiling_seconds: float
    latencies: list[int]
    cpu_seconds: float
    """The job process's CPU, all its threads, start-up and idle end included."""


def run_kafka_bench(setup: KafkaBenchSetup) -> str:
    gen = BenchSetup(events=setup.events, outlinks=setup.outlinks, urls=setup.urls)
    codec = AvroCodec.for_name("FetchEvent")
    values = [codec.encode(e) for e in generated_events(gen, seed=1)]
    clients = list(dict.fromkeys(resolve_client(c) for c in setup.clients))
    runs: list[_ClientRun] = []
    outputs: list[tuple[bytes | None, bytes | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        log = root / "events.avro"
        generate_log(log, gen, seed=1)
        (root / "replay").mkdir()
        cpu_before = children_cpu_seconds()
        replay = spawn_bench_worker(JOB_RUN, log, root / "replay", setup.step_size)
        replay_cpu = children_cpu_seconds() - cpu_before
        for client in clients:
            job = fresh_settings(setup.bootstrap_servers)
            produce_events(job, values)
            state = root / f"state-{client}"
            cpu_before = children_cpu_seconds()
            seconds, entries = timed_job(job, state, setup.step_size, len(values), client=client)
            job_cpu = children_cpu_seconds() - cpu_before
            outputs = _read_all(job, job.topics.frontier)
            ceiling = _ceiling(setup.bootstrap_servers, job, outputs, len(values), client)
            rate = len(values) / seconds
            latencies = paced_latency(
                setup, root / f"latency-{client}", rate / 2, values, client=client
            )
            runs.append(_ClientRun(client, seconds, entries, ceiling, sorted(latencies), job_cpu))
    replay_rate = replay["events"] / replay["seconds"]
    n = len(values)
    lines = [
        f"{n:,} FetchEvents ({setup.outlinks} outlinks each) through one broker; "
        f"{len(outputs):,} frontier records out",
        f"{'run':<44}{'events/s':>10}{'records out/s':>15}{'vs replay':>11}{'vs ceiling':>12}",
        f"{'frontierflow replay (ieca, RocksDB, speed)':<44}{replay_rate:>10,.0f}"
        f"{replay['entries'] / replay['seconds']:>15,.0f}{1.0:>11.2f}",
    ]
    for run in runs:
        rate, ceiling_rate = n / run.seconds, n / run.ceiling_seconds
        lines += [
            f"{'frontierflow run --kafka-client ' + run.client:<44}{rate:>10,.0f}"
            f"{run.entries / run.seconds:>15,.0f}{rate / replay_rate:>11.2f}"
            f"{rate / ceiling_rate:>12.2f}",
            f"{'  ' + run.client + ' alone, no work (ceiling)':<44}{ceiling_rate:>10,.0f}"
            f"{len(outputs) / run.ceiling_seconds:>15,.0f}{ceiling_rate / replay_rate:>11.2f}",
        ]
    lines.append(f"target: the live job >= {REPLAY_TARGET} of the replay's events/s")
    for run in runs:  # the same ratio by each process's own CPU: less moved by other load
        lines.append(
            f"per CPU second of each whole process: replay {n / replay_cpu:,.0f}, "
            f"{run.client} job {n / run.cpu_seconds:,.0f} events "
            f"({replay_cpu / run.cpu_seconds:.2f} of the replay's)"
        )
    for run in runs:
        p50, p99 = percentiles(run.latencies)
        lines.append(
            f"latency produce -> frontier entry, {run.client}, at "
            f"{n / run.seconds / 2:,.0f} events/s: p50 {p50:,.0f} ms, p99 {p99:,.0f} ms "
            f"({len(run.latencies):,} entries)"
        )
    return "\n".join(lines)


def children_cpu_seconds() -> float:
    """User + system CPU of this process's children that have ended, all their threads."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fresh_settings(bootstrap: str, partitions: int = 1) -> KafkaSettings:
    """Topics and a consumer group of their own for one measured run; its fetch-events topic
    of `partitions` partitions."""
    prefix = "bench-" + uuid.uuid4().hex[:8]
    topics = KafkaTopics(
        f"{prefix}-fetch-events", f"{prefix}-frontier", f"{prefix}-control", f"{prefix}-dead"
    )
    return KafkaSettings(bootstrap, topics, group_id=prefix, partitions=partitions)


def bench_topics(settings: KafkaSettings) -> None:
    """The job's topics, but its frontier topic not compacted: the broker's log cleaner would
    drop superseded records while the bench reads them back to count and time them (the
    job writes the same either way: it never changes a topic it finds)."""
    admin = open_admin(settings, "kafka-python")
    try:
        admin.create([TopicSpec(settings.topics.frontier, 1, 1)])
    finally:
        admin.close()
    ensure_topics(settings)


def produce_events(settings: KafkaSettings, values: Iterable[bytes]) -> int:
    """The job's topics created (`bench_topics`), then `values` produced to its
    fetch-events topic, one by one (an iterator is never held whole); how many."""
    bench_topics(settings)
    producer = KafkaProducer(
        bootstrap_servers=settings.bootstrap_servers,
        acks="all",
        linger_ms=5,
        compression_type="lz4",
    )
    produced = 0
    for v in values:
        producer.send(settings.topics.fetch_events, value=v)
        produced += 1
    producer.flush()
    producer.close()
    return produced


def _job_command(
    settings: KafkaSettings, state: Path, step: int, idle_exit: bool, client: str = "auto"
) -> list[str]:
    t = settings.topics
    cmd = [
        sys.executable,
        "-m",
        "frontierflow.pipelines.cli",
        "run",
        "--bootstrap-servers",
        settings.bootstrap_servers,
        "--strategy",
        "ieca",
        "--state-dir",
        str(state),
        "--step-size",
        str(step),
        "--group-id",
        settings.group_id,
        "--topic-fetch-events",
        t.fetch_events,
        "--topic-frontier",
        t.frontier,
        "--topic-fetcher-control",
        t.fetcher_control,
        "--topic-dead-letter",
        t.dead_letter,
        "--kafka-client",
        client,
    ]
    return [*cmd, "--exit-when-idle"] if idle_exit else cmd


def timed_job(
    settings: KafkaSettings,
    state: Path,
    step: int,
    n: int,
    extra: list[str] | None = None,
    *,
    client: str = "auto",
) -> tuple[float, int]:
    """Run the job to the end of the input; (seconds per event × n, output records).

    Timed by the job's own output: from its first frontier record to its last, a span in
    which it processed every event but those of its first step (so process start-up and
    topic set-up are not counted).
    """
    command = [*_job_command(settings, state, step, True, client), *(extra or [])]
    subprocess.run(command, check=True, capture_output=True)
    if n == 0:  # nothing to time (a run that measures the job's start-up)
        return 0.0, 0
    first, last, records = topic_time_span(settings.bootstrap_servers, settings.topics.frontier)
    span_s = (last - first) / 1000
    return span_s * n / max(1, n - step), records


def topic_time_span(bootstrap: str, topic: str) -> tuple[int, int, int]:
    """(earliest timestamp, latest timestamp, records) of `topic` up to its current end,
    read without keeping the records (a scale run's frontier holds millions)."""
    first, last, records = 2**63, -1, 0
    for batch in _batches(bootstrap, topic):
        stamps = [r.timestamp for r in batch]
        first, last, records = min(first, *stamps), max(last, *stamps), records + len(stamps)
    if not records:
        raise RuntimeError(f"{topic} holds no records: the job wrote nothing")
    return first, last, records


def _read_all(settings: KafkaSettings, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    return [(k, v) for _, k, v in read_topic(settings.bootstrap_servers, topic)]


def read_topic(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(timestamp, key, value) of every record of `topic` up to its current end."""
    return [(r.timestamp, r.key, r.value) for batch in _batches(bootstrap, topic) for r in batch]


def _batches(bootstrap: str, topic: str) -> Iterator[list[Any]]:
    """The records of `topic`, every partition from its start to its current end, in the
    batches the consumer polls."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic))]
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    ends = consumer.end_offsets(parts)
    try:
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            yield from consumer.poll(timeout_ms=500, max_records=10_000).values()
    finally:
        consumer.close()


def _ceiling(
    bootstrap: str, job: KafkaSettings, outputs: list[Any], n_in: int, client: str
) -> float:
    """Seconds for `client` alone, through the job's reader and writer, to consume the
    job's input and produce its output (acknowledged)."""
    out_topic = job.topics.frontier + "-ceiling"
    ensure_topics(
        KafkaSettings(
            bootstrap, KafkaTopics(out_topic, out_topic + "-f", out_topic + "-c", out_topic + "-d")
        )
    )
    name = resolve_client(client)
    reader = open_reader(job, name)
    writer = open_writer(job, name)
    reader.assign(job.topics.fetch_events, {})
    per_event = len(outputs) / n_in
    started = time.perf_counter()
    seen, sent = 0, 0
    while seen < n_in:
        seen += len(reader.poll(500, 500))
        upto = round(seen * per_event)
        for key, value in outputs[sent:upto]:
            writer.send(out_topic, key, value)
        sent = upto
    writer.flush()
    elapsed = time.perf_counter() - started
    reader.close()
    writer.close()
    return elapsed


def paced_latency(
    setup: KafkaBenchSetup,
    state: Path,
    rate: float,
    values: list[bytes],
    *,
    client: str = "auto",
) -> list[int]:
    """Per frontier entry: ms from the event's produce time to the entry's send time, once
    the job is running: one event is produced first and its effect waited for, so the
    job's start-up is not measured as latency."""
    settings = fresh_settings(setup.bootstrap_servers)
    bench_topics(settings)
    job = subprocess.Popen(
        _job_command(settings, state, setup.step_size, False, client),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        produce_paced(settings, values[-1:], 1.0, 1.0)  # a page the paced ones are not
        _wait_drained(settings, 1)
        since_ms = int(time.time() * 1000)
        count = produce_paced(settings, values, rate, setup.latency_seconds)
        _wait_drained(settings, count + 1)
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=60)
    return [
        latency
        for ts, _key, value in read_topic(setup.bootstrap_servers, settings.topics.frontier)
        if (latency := entry_latency(ts, value, since_ms)) is not None
    ]


LATENCY_URL = "?latency="
"""What `produce_paced` appends to each page's URL (then its index): every page is new."""


def produce_paced(settings: KafkaSettings, values: list[bytes], rate: float, seconds: float) -> int:
    """Produce `rate` events a second for `seconds` (at least one) to the fetch-events
    topic, each of `values` in turn as a page never fetched before (its URL + `?latency=i`)
    fetched now (`fetched_at`: the wall clock at its send); returns how many."""
    codec = AvroCodec.for_name("FetchEvent")
    producer = KafkaProducer(bootstrap_servers=settings.bootstrap_servers, acks="all", linger_ms=0)
    count = max(1, int(rate * seconds))
    started = time.monotonic()
    try:
        for i in range(count):
            due = started + i / rate
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)  # pacing the load, not waiting for a result
            record = codec.decode(values[i % len(values)])
            record["fetched_at"] = int(time.time() * 1000)
            record["url"] = f"{record['url']}{LATENCY_URL}{i}"
            producer.send(settings.topics.fetch_events, value=codec.encode(record))
        producer.flush()
    finally:
        producer.close()
    return count


_ENTRY_CODEC = AvroCodec.for_name("FrontierEntry")


def entry_latency(timestamp_ms: int, value: bytes | None, since_ms: int) -> int | None:
    """ms from a frontier entry's `emitted_at` (its event's `fetched_at`: the wall clock
    when `produce_paced` sent the event) to the record's Kafka timestamp (when the job's
    producer sent it); None for a tombstone or an entry emitted before `since_ms`."""
    if value is None:
        return None
    emitted = _ENTRY_CODEC.decode(value)["emitted_at"]
    return timestamp_ms - emitted if emitted >= since_ms else None


def by_send_time(sent: list[tuple[int, int]], parts: int = 3) -> list[float]:
    """The median latency of each of `parts` equal parts of (send time, latency) pairs, in
    send order: even medians mean a fixed wait per event; rising ones a queue, the job
    taking the paced events more slowly than they came."""
    ordered = [latency for _, latency in sorted(sent)]
    cuts = [len(ordered) * i // parts for i in range(parts + 1)]
    return [statistics.median(ordered[a:b]) if b > a else float("nan") for a, b in pairwise(cuts)]


def percentiles(ordered: list[int]) -> tuple[float, float]:
    """(p50, p99) of sorted values (nan, nan when empty)."""
    if not ordered:
        return float("nan"), float("nan")
    return statistics.median(ordered), ordered[int(0.99 * (len(ordered) - 1))]


def _wait_drained(settings: KafkaSettings, events: int) -> None:
    """Until the job has sent a tombstone for every produced event (its fetch took effect)."""
    consumer = KafkaConsumer(
        bootstrap_servers=settings.bootstrap_servers,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    consumer.subscribe([settings.topics.frontier])
    tombstones = 0
    deadline = time.monotonic() + 600
    while tombstones < events and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            tombstones += sum(1 for r in records if r.value is None)
    consumer.close()


if __name__ == "__main__":
    print(run_kafka_bench(KafkaBenchSetup(bootstrap_servers=os.environ["BOOTSTRAP"])))
