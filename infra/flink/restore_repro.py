"""Does a Beam job on the session cluster keep moving records after a checkpoint restore?

The smallest job of the unbounded form's shape: Java's KafkaIO read (through the project's
expansion service, `use_deprecated_read`, as `pipelines/beam/kafka_io.py` does) → one
trivial Python `Map` → Java's KafkaIO write, at parallelism 2 on the cluster of
`cluster.sh`, with the SDK worker pool of `worker_pool.py` (EXTERNAL) and Flink
checkpoints every 2 s. The script produces numbered records without pause, waits for a
completed checkpoint and for output, SIGKILLs a TaskManager, starts a fresh one (as the
tests' supervisor does), and watches whether records produced after the restore come out.
Optional pieces of the real form can be put between the map and the sink (`--stage`).

    python infra/flink/restore_repro.py --bootstrap HOST:PORT --flink-master HOST:PORT \
        --worker-pool HOST:PORT --job-server-jar JAR --expansion-jar JAR \
        --cluster-dir DIR [--stage map|gbk|stateful|sideinput] [--checkpointing conf|beam]

It prints one line of progress every two seconds and a verdict as its last line; exit
code 0 when records produced after the restore reached the sink, 1 when none did.
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
import typing
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
from apache_beam.io.kafka import WriteToKafka
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import trigger, userstate, window
from apache_beam.transforms.external import ExternalTransform, NamedTupleBasedPayloadBuilder
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from frontierflow.pipelines.beam.kafka_io import (
    BYTES,
    LOG_APPEND_TIME,
    READ_WITH_METADATA,
    _ReadConfiguration,
    expansion_service,
)

HERE = Path(__file__).resolve().parent
CLUSTER = HERE / "cluster.sh"
SERIALIZER = "org.apache.kafka.common.serialization.ByteArraySerializer"
_LOG = logging.getLogger("restore_repro")


# ------------------------------------------------------------------ the job
def build(pipeline: beam.Pipeline, args: argparse.Namespace, topic_in: str, topic_out: str) -> None:
    """KafkaIO read → the stage under test → KafkaIO write (key: partition, value: seq)."""
    configuration = _ReadConfiguration(
        consumer_config={
            "bootstrap.servers": args.bootstrap,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": "false",
        },
        topics=[topic_in],
        key_deserializer=BYTES,
        value_deserializer=BYTES,
        timestamp_policy=LOG_APPEND_TIME,
        commit_offset_in_finalize=False,
    )
    rows = pipeline | "KafkaIO" >> ExternalTransform(
        READ_WITH_METADATA,
        NamedTupleBasedPayloadBuilder(configuration),
        expansion_service(args.expansion_jar),
    )
    pairs = rows | "Map" >> beam.Map(lambda r: (b"%d" % r.partition, r.value or b""))
    if args.stage == "gbk":
        pairs = pairs | "Window" >> beam.WindowInto(window.FixedWindows(1)) | "Group" >> (
            beam.GroupByKey()
        ) | "Ungroup" >> beam.FlatMap(lambda kv: [(kv[0], v) for v in kv[1]]) | (
            "Global" >> beam.WindowInto(window.GlobalWindows())
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
            | "Global" >> beam.WindowInto(window.GlobalWindows(), trigger=trigger.Repeatedly(
                trigger.AfterCount(1)), accumulation_mode=trigger.AccumulationMode.DISCARDING)
        )
    typed = pairs | "Bytes" >> beam.Map(lambda kv: kv).with_output_types(
        typing.Tuple[bytes, bytes]
    )
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
        held: Any = beam.DoFn.StateParam(HELD),
        due: Any = beam.DoFn.TimerParam(DUE),
    ) -> Iterator[tuple[bytes, bytes]]:
        held.add(kv[1])
        due.set(ts)
        return iter(())

    @userstate.on_timer(DUE)
    def release(
        self, key: Any = beam.DoFn.KeyParam, held: Any = beam.DoFn.StateParam(HELD)
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
            topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
            enable_auto_commit=False, consumer_timeout_ms=500,
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


def lateness_metrics(master: str, jid: str) -> list[str]:
    """Beam's late-data counters (`droppedDueToLateness`) of every vertex that has one."""
    lines = []
    for v in rest(master, f"/jobs/{jid}")["vertices"]:
        ids = [m["id"] for m in rest(master, f"/jobs/{jid}/vertices/{v['id']}/metrics")]
        late = [i for i in ids if "droppedDueToLateness" in i]
        if late:
            got = rest(master, f"/jobs/{jid}/vertices/{v['id']}/metrics?get={','.join(late)}")
            lines += [f"{v['name'][:40]!r} {m['id']}={m['value']}" for m in got]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--flink-master", required=True)
    p.add_argument("--worker-pool", required=True, help="EXTERNAL pool, or 'loopback'")
    p.add_argument("--job-server-jar", required=True)
    p.add_argument("--expansion-jar", required=True)
    p.add_argument("--cluster-dir", required=True)
    p.add_argument("--stage", choices=("map", "gbk", "stateful", "sideinput"), default="map")
    p.add_argument("--checkpointing", choices=("conf", "beam", "off"), default="conf")
    p.add_argument("--parallelism", type=int, default=2)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--kill", type=int, default=1, help="TaskManager to SIGKILL (0: none)")
    p.add_argument("--after-restore-s", type=float, default=120.0)
    p.add_argument("--beam-arg", action="append", default=[])
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)

    run_id = uuid.uuid4().hex[:8]
    topic_in, topic_out = f"repro-in-{run_id}", f"repro-out-{run_id}"
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap)
    admin.create_topics([
        NewTopic(topic_in, args.partitions, 1,
                 topic_configs={"message.timestamp.type": LOG_APPEND_TIME}),
        NewTopic(topic_out, 1, 1),
    ])
    admin.close()

    beam_args = [
        "--runner=FlinkRunner",
        f"--flink_master={args.flink_master}",
        "--flink_version=1.19",
        f"--flink_job_server_jar={args.job_server_jar}",
        f"--parallelism={args.parallelism}",
        "--streaming",
        f"--job_name=restore-repro-{args.stage}-{run_id}",
    ]
    if args.worker_pool == "loopback":
        beam_args.append("--environment_type=LOOPBACK")
    elif args.worker_pool.startswith("{"):
        beam_args += ["--environment_type=PROCESS", f"--environment_config={args.worker_pool}"]
    else:
        beam_args += ["--environment_type=EXTERNAL", f"--environment_config={args.worker_pool}"]
    if args.checkpointing == "conf":
        conf = Path(tempfile.mkdtemp(prefix="restore-repro-conf-"))
        (conf / "config.yaml").write_text("execution.checkpointing.interval: 2 s\n")
        beam_args.append(f"--flink_conf_dir={conf}")
    elif args.checkpointing == "beam":
        beam_args.append("--checkpointing_interval=2000")
    beam_args += args.beam_arg
    _LOG.info("topics %s -> %s; options %s", topic_in, topic_out, beam_args)

    before = set(j["jid"] for j in rest(args.flink_master, "/jobs/overview")["jobs"])
    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    build(pipeline, args, topic_in, topic_out)
    result = pipeline.run()

    def new_running() -> str | None:
        jobs = rest(args.flink_master, "/jobs/overview")["jobs"]
        new = [j["jid"] for j in jobs if j["jid"] not in before and j["state"] == "RUNNING"]
        return new[0] if new else None

    jid = wait_for(new_running, "the job to run", 300)
    _LOG.info("job %s running", jid)
    producer, sink = Producer(args.bootstrap, topic_in, args.rate), Sink(args.bootstrap, topic_out)
    producer.start()
    sink.start()

    def progress(tag: str) -> None:
        state = rest(args.flink_master, f"/jobs/{jid}")["state"]
        _LOG.info(
            "%s produced=%d out_records=%d out_distinct=%d max_out=%s job=%s checkpoints=%s",
            tag, producer.sent, sink.records, len(sink.seen), max(sink.seen, default=None),
            state, checkpoint_counts(args.flink_master, jid),
        )

    verdict = 1
    try:
        def ready() -> bool:
            progress("before-kill")
            done = checkpoint_counts(args.flink_master, jid)["completed"]
            return len(sink.seen) > 0 and (done > 0 or args.checkpointing == "off")

        wait_for(ready, "output and a completed checkpoint", 300, 2.0)
        for line in vertex_records(args.flink_master, jid):
            _LOG.info("vertex before kill: %s", line)
        if args.kill:
            last_before = max(sink.seen)
            cluster(args.cluster_dir, "kill-taskmanager", str(args.kill))
            _LOG.info("killed TaskManager %d (max seq out so far %d)", args.kill, last_before)
            cluster(args.cluster_dir, "start-taskmanager", str(args.kill))
            _LOG.info("started a fresh TaskManager %d", args.kill)

            def restored_and_running() -> bool:
                progress("restoring")
                counts = checkpoint_counts(args.flink_master, jid)
                state = rest(args.flink_master, f"/jobs/{jid}")["state"]
                return state == "RUNNING" and (
                    counts["restored_id"] is not None or args.checkpointing == "off"
                )

            wait_for(restored_and_running, "the job restored and running", 180, 2.0)
            # records produced from here on can only come out through the restored job
            first_after = producer.sent
            _LOG.info("restored and RUNNING; first seq produced after: %d", first_after)
            try:
                def moved() -> bool:
                    progress("after-restore")
                    return any(s >= first_after for s in sink.seen)

                wait_for(moved, "a record produced after the restore at the sink",
                         args.after_restore_s, 2.0)
                # and it keeps moving: a record produced 30 s later comes out too
                time.sleep(30.0)
                later = producer.sent

                def moved_on() -> bool:
                    progress("after-restore")
                    return any(s >= later for s in sink.seen)

                wait_for(moved_on, f"seq {later} at the sink", args.after_restore_s, 2.0)
                verdict = 0
            except TimeoutError as e:
                _LOG.info("%s", e)
            for line in vertex_records(args.flink_master, jid):
                _LOG.info("vertex after restore: %s", line)
        else:
            time.sleep(args.after_restore_s)
            verdict = 0
        # stop producing, let what is in flight drain, then count what never came out
        producer.stopped.set()
        producer.join()
        drained: list[int] = []

        def settled() -> bool:
            drained.append(len(sink.seen))
            return len(drained) > 5 and drained[-1] == drained[-6]

        try:
            wait_for(settled, "the sink to settle", 120, 2.0)
        except TimeoutError as e:
            _LOG.info("%s", e)
        missing = sorted(set(range(producer.sent)) - sink.seen)
        for line in lateness_metrics(args.flink_master, jid):
            _LOG.info("late-data counter: %s", line)
        _LOG.info("missing at the sink: %d of %d (first few %s)",
                  len(missing), producer.sent, missing[:10])
    finally:
        producer.stopped.set()
        sink.stopped.set()
        try:
            rest(args.flink_master, f"/jobs/{jid}?mode=cancel", "PATCH")
        except OSError as e:
            _LOG.info("cancel: %s", e)
        try:
            result.cancel()
        except Exception as e:  # noqa: BLE001 — the runner's own cancel may not reach it
            _LOG.info("runner cancel: %s", e)
    print("VERDICT:", "moving after restore" if verdict == 0 else "STALLED after restore",
          f"job={jid}", flush=True)
    return verdict


if __name__ == "__main__":
    sys.exit(main())
