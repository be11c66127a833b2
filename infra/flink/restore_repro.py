"""Does a Beam job on the session cluster keep its records through Flink checkpoints and a
restore? The smallest job of the unbounded form's shape, to tell the runner's faults from
the form's.

Java's KafkaIO read (through the project's expansion service, `use_deprecated_read`, as
`pipelines/beam/kafka_io.py` does) → one trivial Python `Map` → Java's KafkaIO write, at
parallelism 2 on the cluster of `cluster.sh`, with the SDK worker pool of `worker_pool.py`
(EXTERNAL) and Flink checkpoints every 2 s. The script produces numbered records without
pause, waits for output and a completed checkpoint, SIGKILLs a TaskManager and starts a
fresh one (as the tests' supervisor does), and checks that records produced after the
restore reach the sink. Then it stops producing, lets the sink settle, and counts the
records that never came out and Beam's late-data counters. `--stage` puts one piece of the
real form between the map and the sink: a 1 s windowed GroupByKey, a stateful step (bag +
event-time timer per key), or a windowed count as a side input. What it showed is in
`infra/flink/README.md` ("Checkpoints with a Python stage").

    python infra/flink/restore_repro.py --bootstrap HOST:PORT --flink-master HOST:PORT \
        --worker-pool HOST:PORT --job-server-jar JAR --expansion-jar JAR \
        --cluster-dir DIR [--stage map|gbk|stateful|sideinput] [--checkpointing conf|beam|off] \
        [--kill N] [--beam-arg=--finish_bundle_before_checkpointing]

It logs its progress every two seconds and prints `OUTCOME: {json}` last; exit code 0 when
no record was lost and (with a kill) records produced after the restore came out.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.io.kafka import WriteToKafka
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, userstate, window
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from frontierflow.pipelines.beam.kafka_io import (
    LOG_APPEND_TIME,
    expansion_service,
    kafka_io_records,
)

HERE = Path(__file__).resolve().parent
CLUSTER = HERE / "cluster.sh"
SERIALIZER = "org.apache.kafka.common.serialization.ByteArraySerializer"
_LOG = logging.getLogger("restore_repro")


# ------------------------------------------------------------------ the job
def build(pipeline: beam.Pipeline, args: argparse.Namespace, topic_in: str, topic_out: str) -> None:
    """KafkaIO read → the stage under test → KafkaIO write (key: partition, value: seq)."""
    consumer = {
        "bootstrap.servers": args.bootstrap,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": "false",
    }
    rows = kafka_io_records(pipeline, consumer, [topic_in], args.expansion_jar)
    pairs = rows | "Map" >> beam.Map(lambda r: (b"%d" % r.partition, r.value or b""))
    if args.stage == "gbk":
        pairs = (
            pairs
            | "Window" >> beam.WindowInto(window.FixedWindows(1))
            | "Group" >> (beam.GroupByKey())
            | "Ungroup" >> beam.FlatMap(lambda kv: [(kv[0], v) for v in kv[1]])
            | ("Global" >> beam.WindowInto(window.GlobalWindows()))
        )
    elif args.stage == "stateful":
        pairs = pairs | "Hold" >> beam.ParDo(_HoldUntilWatermark())
    elif args.stage == "sideinput":
        ticks = (
            pairs
            | "TickWindow" >> beam.WindowInto(window.FixedWindows(1))
            | "Count" >> beam.combiners.Count.Globally().without_defaults()
        )
        pairs = (
            pairs
            | "MainWindow" >> beam.WindowInto(window.FixedWindows(1))
            | "WithSide" >> beam.Map(lambda kv, n: kv, n=beam.pvalue.AsSingleton(ticks))
            | "Global"
            >> beam.WindowInto(
                window.GlobalWindows(),
                trigger=trigger.Repeatedly(trigger.AfterCount(1)),
                accumulation_mode=trigger.AccumulationMode.DISCARDING,
            )
        )
    typed = pairs | "Bytes" >> beam.Map(lambda kv: kv).with_output_types(tuple[bytes, bytes])
    typed | "KafkaWrite" >> WriteToKafka(
        producer_config={"bootstrap.servers": args.bootstrap},
        topic=topic_out,
        key_serializer=SERIALIZER,
        value_serializer=SERIALIZER,
        expansion_service=expansion_service(args.expansion_jar),
    )


class _HoldUntilWatermark(beam.DoFn):
    """Per key, a bag of values released by an event-time timer (the real form's
    timer-ordered steps, in their smallest form)."""

    HELD = userstate.BagStateSpec("held", beam.coders.BytesCoder())
    DUE = userstate.TimerSpec("due", userstate.TimeDomain.WATERMARK)

    def process(
        self,
        kv: tuple[bytes, bytes],
        ts: Any = beam.DoFn.TimestampParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008 (Beam's idiom)
        due: Any = beam.DoFn.TimerParam(DUE),  # noqa: B008
    ) -> Iterator[tuple[bytes, bytes]]:
        held.add(kv[1])
        due.set(ts)
        return iter(())

    @userstate.on_timer(DUE)
    def release(
        self,
        key: Any = beam.DoFn.KeyParam,
        held: Any = beam.DoFn.StateParam(HELD),  # noqa: B008
    ) -> Iterator[tuple[bytes, bytes]]:
        values = list(held.read())
        held.clear()
        for v in values:
            yield key, v


# ------------------------------------------------------------------ the harness
def rest(master: str, path: str, method: str = "GET") -> Any:
    request = urllib.request.Request(f"http://{master}{path}", method=method)
    with urllib.request.urlopen(request, timeout=10) as resp:
        body = resp.read()
    return json.loads(body) if body else None


def cluster(cluster_dir: str, *args: str) -> str:
    env = {**os.environ, "FLINK_CLUSTER_DIR": cluster_dir, "PYTHON": sys.executable}
    proc = subprocess.run(
        ["bash", str(CLUSTER), *args], capture_output=True, text=True, env=env, timeout=180
    )
    if proc.returncode:
        raise RuntimeError(f"cluster.sh {' '.join(args)}: {proc.stderr}")
    return proc.stdout


def wait_for(check: Callable[[], Any], what: str, timeout_s: float, every_s: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(every_s)


class Producer(threading.Thread):
    """Numbered records to the input topic, `rate` per second, until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(daemon=True)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap)
        self.topic = topic
        self.rate = rate
        self.sent = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(1.0 / self.rate):
            self.producer.send(self.topic, b"%d" % self.sent)
            self.sent += 1
        self.producer.flush()


class Sink(threading.Thread):
    """Reads the output topic; the set of sequence numbers that came out."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            consumer_timeout_ms=500,
        )
        self.seen: set[int] = set()
        self.records = 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            for message in self.consumer:
                self.records += 1
                self.seen.add(int(message.value))


def checkpoint_counts(master: str, jid: str) -> dict[str, Any]:
    stats = rest(master, f"/jobs/{jid}/checkpoints")
    counts = dict(stats["counts"])
    restored = (stats.get("latest") or {}).get("restored")
    counts["restored_id"] = restored["id"] if restored else None
    return counts


def vertex_records(master: str, jid: str) -> list[str]:
    """name: records in / out, per vertex (the job's detail page)."""
    job = rest(master, f"/jobs/{jid}")
    lines = []
    for v in job["vertices"]:
        m = v.get("metrics", {})
        lines.append(
            f"{v['name'][:70]!r} {v['status']} in={m.get('read-records')} "
            f"out={m.get('write-records')}"
        )
    return lines


def dropped_late(master: str, jid: str) -> int:
    """The sum of Beam's late-data counters (`droppedDueToLateness`, one per windowed
    grouping and subtask) over the job's vertices: elements a GroupByKey dropped because
    they arrived behind the watermark."""
    total = 0
    for v in rest(master, f"/jobs/{jid}")["vertices"]:
        ids = [m["id"] for m in rest(master, f"/jobs/{jid}/vertices/{v['id']}/metrics")]
        late = [i for i in ids if i.endswith("droppedDueToLateness")]
        if late:
            got = rest(master, f"/jobs/{jid}/vertices/{v['id']}/metrics?get={','.join(late)}")
            total += sum(int(float(m["value"])) for m in got)
    return total


@dataclass
class Outcome:
    """What one run showed."""

    job_id: str
    produced: int  # records produced to the input topic
    missing: int  # of those, how many never reached the sink (after it settled)
    dropped_late: int  # Beam's late-data counters, summed
    checkpoints: dict[str, Any]  # REST `/jobs/ID/checkpoints` counts at the end
    restored_id: int | None  # the checkpoint the job last restored from, if any
    moved_after_restore: bool | None  # records produced after the restore came out
    final_state: str  # the job's state before it was cancelled


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--flink-master", required=True)
    p.add_argument("--worker-pool", required=True, help="EXTERNAL pool address, or 'loopback'")
    p.add_argument("--job-server-jar", required=True)
    p.add_argument("--expansion-jar", required=True)
    p.add_argument("--cluster-dir", required=True)
    p.add_argument("--stage", choices=("map", "gbk", "stateful", "sideinput"), default="map")
    p.add_argument("--checkpointing", choices=("conf", "beam", "off"), default="conf")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--rate", type=float, default=20.0, help="records per second")
    p.add_argument("--kill", type=int, default=1, help="TaskManager to SIGKILL (0: none)")
    p.add_argument(
        "--after-restore-s",
        type=float,
        default=120.0,
        help="how long to wait for output after the restore (without --kill: "
        "how long to run after the first output)",
    )
    p.add_argument(
        "--beam-arg",
        action="append",
        default=[],
        help="one more pipeline option, e.g. --finish_bundle_before_checkpointing",
    )
    return p.parse_args(argv)


def beam_options(args: argparse.Namespace, job_name: str, conf_dir: Path) -> list[str]:
    options = [
        "--runner=FlinkRunner",
        f"--flink_master={args.flink_master}",
        "--flink_version=1.19",
        f"--flink_job_server_jar={args.job_server_jar}",
        f"--parallelism={args.parallelism}",
        "--streaming",
        f"--job_name={job_name}",
    ]
    if args.worker_pool == "loopback":
        options.append("--environment_type=LOOPBACK")
    else:
        options += ["--environment_type=EXTERNAL", f"--environment_config={args.worker_pool}"]
    if args.checkpointing == "conf":
        # Flink's own periodic checkpoints; Beam's pipeline option is the other way
        (conf_dir / "config.yaml").write_text("execution.checkpointing.interval: 2 s\n")
        options.append(f"--flink_conf_dir={conf_dir}")
    elif args.checkpointing == "beam":
        options.append("--checkpointing_interval=2000")
    return options + args.beam_arg


def run(args: argparse.Namespace) -> Outcome:
    """Submit the job, produce, kill and replace a TaskManager, watch; cancel the job."""
    run_id = uuid.uuid4().hex[:8]
    topic_in, topic_out = f"repro-in-{run_id}", f"repro-out-{run_id}"
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
    admin.create_topics(
        [
            NewTopic(
                topic_in,
                args.partitions,
                1,
                topic_configs={"message.timestamp.type": LOG_APPEND_TIME},
            ),
            NewTopic(topic_out, 1, 1),
        ]
    )
    admin.close()
    master = args.flink_master
    with tempfile.TemporaryDirectory(prefix="restore-repro-conf-") as conf_dir:
        options = beam_options(args, f"restore-repro-{args.stage}-{run_id}", Path(conf_dir))
        _LOG.info("topics %s -> %s; options %s", topic_in, topic_out, options)
        before = {j["jid"] for j in rest(master, "/jobs/overview")["jobs"]}
        pipeline = beam.Pipeline(options=PipelineOptions(options))
        build(pipeline, args, topic_in, topic_out)
        result = pipeline.run()

        def new_running() -> str | None:
            jobs = rest(master, "/jobs/overview")["jobs"]
            new = [j["jid"] for j in jobs if j["jid"] not in before and j["state"] == "RUNNING"]
            return new[0] if new else None

        jid: str = wait_for(new_running, "the job to run", 300)
    _LOG.info("job %s running", jid)
    producer, sink = Producer(args.bootstrap, topic_in, args.rate), Sink(args.bootstrap, topic_out)
    producer.start()
    sink.start()

    def state() -> str:
        return str(rest(master, f"/jobs/{jid}")["state"])

    def progress(tag: str) -> dict[str, Any]:
        counts = checkpoint_counts(master, jid)
        _LOG.info(
            "%s produced=%d out_records=%d out_distinct=%d max_out=%s job=%s checkpoints=%s",
            tag,
            producer.sent,
            sink.records,
            len(sink.seen),
            max(sink.seen, default=None),
            state(),
            counts,
        )
        return counts

    moved: bool | None = None
    try:
        wait_for(
            lambda: (
                sink.seen
                and (progress("before-kill")["completed"] > 0 or args.checkpointing == "off")
            ),
            "output and a completed checkpoint",
            300,
            2.0,
        )
        if args.kill:
            cluster(args.cluster_dir, "kill-taskmanager", str(args.kill))
            _LOG.info("killed TaskManager %d (max seq out so far %d)", args.kill, max(sink.seen))
            cluster(args.cluster_dir, "start-taskmanager", str(args.kill))
            _LOG.info("started a fresh TaskManager %d", args.kill)
            wait_for(
                lambda: (
                    (
                        progress("restoring")["restored_id"] is not None
                        or args.checkpointing == "off"
                    )
                    and state() == "RUNNING"
                ),
                "the job restored and running",
                180,
                2.0,
            )
            # records produced from here on can only come out through the restored job;
            # and it keeps moving: one produced 30 s later comes out too
            moved = True
            for pause_s in (0.0, 30.0):
                time.sleep(pause_s)
                mark = producer.sent
                try:
                    wait_for(
                        lambda m=mark: progress("after-restore") and max(sink.seen) >= m,
                        f"seq {mark} at the sink",
                        args.after_restore_s,
                        2.0,
                    )
                except TimeoutError as e:
                    _LOG.info("%s", e)
                    moved = False
                    break
        else:
            time.sleep(args.after_restore_s)
        for line in vertex_records(master, jid):
            _LOG.info("vertex: %s", line)
        # stop producing, let what is in flight drain, then count what never came out
        producer.stopped.set()
        producer.join()
        counts: list[int] = []
        try:
            wait_for(
                lambda: (
                    counts.append(len(sink.seen)) or (len(counts) > 5 and counts[-1] == counts[-6])
                ),
                "the sink to settle",
                120,
                2.0,
            )
        except TimeoutError as e:
            _LOG.info("%s", e)
        final = checkpoint_counts(master, jid)
        outcome = Outcome(
            job_id=jid,
            produced=producer.sent,
            missing=len(set(range(producer.sent)) - sink.seen),
            dropped_late=dropped_late(master, jid),
            checkpoints={k: v for k, v in final.items() if k != "restored_id"},
            restored_id=final["restored_id"],
            moved_after_restore=moved,
            final_state=state(),
        )
    finally:
        producer.stopped.set()
        sink.stopped.set()
        try:
            rest(master, f"/jobs/{jid}?mode=cancel", "PATCH")
        except OSError as e:
            _LOG.info("cancel: %s", e)
        try:
            result.cancel()
        except Exception as e:  # the runner's own cancel may not reach the job
            _LOG.info("runner cancel: %s", e)
    return outcome


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    outcome = run(parse_args(argv))
    print("OUTCOME:", json.dumps(asdict(outcome)), flush=True)
    ok = outcome.missing == 0 and outcome.moved_after_restore is not False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
