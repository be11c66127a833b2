"""`frontierflow bench [engine|kafka|beam|warc|urlfrontier|foragers|shard-state]`: throughput
of the embedded engine with RocksDB state (the default), of Kafka → frontierflow → Kafka, of
one log on the Beam runners, of reading a WARC, of the URL Frontier service, of the forager
fleet operator, and the costs of the Beam form's shard state as a shard grows."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from frontierflow.pipelines.cli.common import csv_list
from frontierflow.pipelines.cli.groups import Command, add_group
from frontierflow.pipelines.cli.urlfrontier import STRATEGIES as URLFRONTIER_STRATEGIES


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    engine = Command(
        "IECA throughput with RocksDB state vs pass-through and raw fastavro",
        _engine_arguments,
        bench,
    )
    add_group(
        sub,
        "bench",
        "benchmarks: engine (default), kafka, beam, warc, urlfrontier, foragers, shard-state",
        engine,
        {
            "engine": engine,
            "kafka": Command(
                "Kafka → frontierflow → Kafka vs a no-work ceiling", _kafka_arguments, bench_kafka
            ),
            "beam": Command(
                "one log: embedded engine vs Beam local/Prism/Flink", _beam_arguments, bench_beam
            ),
            "warc": Command(
                "a WARC into FetchEvents: events/s, beside warcio and fastwarc alone",
                _warc_arguments,
                bench_warc,
            ),
            "urlfrontier": Command(
                "PutURLs and GetURLs throughput of the URL Frontier service",
                _urlfrontier_arguments,
                bench_urlfrontier,
            ),
            "foragers": Command(
                "the forager fleet in the engine vs the direct simulation",
                _foragers_arguments,
                bench_foragers,
            ),
            "shard-state": Command(
                "the unbounded Beam form's shard state as a shard grows: append vs "
                "whole-cell rewrite, compaction, rebuild, state-cache weighing",
                _shard_state_arguments,
                bench_shard_state,
            ),
        },
    )


def _engine_arguments(bp: argparse.ArgumentParser) -> None:
    bp.add_argument("--events", type=int, default=None, help="20,000; with --scale 200,000")
    bp.add_argument("--outlinks", type=int, default=30)
    bp.add_argument("--urls", type=int, default=200_000, help="distinct URLs in the log")
    bp.add_argument("--step-size", type=int, default=500)
    bp.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="runs of each, medians reported: 3; with --scale, rounds of the default replays, "
        "the populations' order reversed each round, the median ratio reported: 1",
    )
    bp.add_argument("--work-dir", type=Path, default=None)
    bp.add_argument(
        "--scale",
        action="store_true",
        help="IECA + RocksDB only, over each --scale-urls population of URLs already in "
        "state: events/s, ratio, peak RSS, bytes per URL, write amplification, restart",
    )
    bp.add_argument(
        "--scale-urls",
        type=csv_list,
        default=("1M", "10M"),
        help="URLs in state before the timed log (k and M allowed): 1M,10M",
    )
    bp.add_argument(
        "--new-share",
        type=float,
        default=0.6,
        help="with --scale: share of each event's outlinks to URLs never seen (0.6)",
    )
    bp.add_argument(
        "--scale-variants",
        type=csv_list,
        default=("default",),
        help="with --scale: store options to compare, each with a state and a run of its "
        "own: default, before (as before the tuning for 100M URLs), or default with one "
        "choice undone (the benchmarks guide lists them)",
    )
    bp.add_argument(
        "--no-restart",
        action="store_true",
        help="with --scale: skip the kill -9 and restart of each population's default run",
    )
    bp.add_argument(
        "--hold-files",
        action="store_true",
        help="with --scale: also run each population's default replay with the state's "
        "files held in memory by another process, so no read of them waits for the disk",
    )
    bp.add_argument(
        "--cold-files",
        action="store_true",
        help="with --scale: do not read each built state's files once before its runs, so "
        "they start with the state on the disk, as after a reboot",
    )
    bp.add_argument(
        "--live-bootstrap",
        default=None,
        metavar="HOST:PORT",
        help="with --scale: also run the live job (frontierflow run) on each population "
        "through this broker, on the same state and log",
    )
    bp.add_argument(
        "--ui",
        action="store_true",
        help="also run IECA with the operator's page served and polled once a second "
        "(ieca+page) and print its ratio to IECA without it",
    )


def _kafka_arguments(kp: argparse.ArgumentParser) -> None:
    kp.add_argument("--bootstrap-servers", required=True, help="HOST:PORT of a broker")
    kp.add_argument("--events", type=int, default=10_000)
    kp.add_argument("--step-size", type=int, default=500)
    kp.add_argument(
        "--latency-seconds",
        type=float,
        default=None,
        help="how long the paced load runs (default: 15 s; 60 s with --beam-stream, whose "
        "queue takes tens of seconds to show whether it keeps up)",
    )
    kp.add_argument(
        "--kafka-client",
        choices=("auto", "kafka-python", "confluent"),
        action="append",
        default=None,
        help="the job's Kafka client (default auto: confluent-kafka when installed); repeat "
        "it to measure several side by side in one run",
    )
    kp.add_argument(
        "--ui",
        action="store_true",
        help="measure the operator's page instead: events/s without and with --ui-port "
        "(a client polling the page's endpoint once a second), alternating runs, ratio",
    )
    kp.add_argument("--repeats", type=int, default=3, help="with --ui: runs of each kind")
    kp.add_argument(
        "--beam-stream",
        choices=("flink", "flink-cluster", "flink-cluster-2"),
        default=None,
        help="measure instead the unbounded Beam form (--clock windowed:W, KafkaIO) on this "
        "runner beside the embedded engine, to an equal frontier, net of its start-up",
    )
    kp.add_argument("--urls", type=int, default=200_000, help="URLs in the population")
    kp.add_argument(
        "--links",
        choices=("zipf", "uniform"),
        default="zipf",
        help="with --beam-stream: outlinks drawn by popularity, or uniformly (a large "
        "--urls then puts ~events x outlinks distinct URLs into state)",
    )
    kp.add_argument(
        "--timeout-s", type=float, default=1_800.0, help="with --beam-stream: the Beam run's"
    )
    kp.add_argument("--clock-window-ms", type=int, default=1_000, help="with --beam-stream: W")
    kp.add_argument(
        "--fetch-partitions",
        type=int,
        default=None,
        help="with --beam-stream: partitions of the fetch-events topics (default: the job's "
        "parallelism, 2 on flink and flink-cluster-2: each source subtask reads one)",
    )
    kp.add_argument(
        "--latency-rate",
        type=float,
        default=None,
        help="with --beam-stream: events/s of the paced load the latency is measured at "
        "(default: half the form's own net rate), to compare settings at one load",
    )
    kp.add_argument(
        "--job-endpoint",
        default=None,
        help="with --beam-stream on a session cluster: HOST:PORT of a job server kept running "
        "(infra/flink/job-server.sh start), instead of one started for the job",
    )
    kp.add_argument(
        "--kafka-io",
        default=None,
        help="with --beam-stream: HOST:PORT of a KafkaIO expansion service kept running "
        "(infra/flink/job-server.sh start), instead of one started for the job",
    )
    _flink_arguments(kp)


def _beam_arguments(bb: argparse.ArgumentParser) -> None:
    bb.add_argument("--events", type=int, default=2_000)
    bb.add_argument("--outlinks", type=int, default=30)
    bb.add_argument(
        "--graph",
        default=None,
        help="instead of the generated log, a breadth-first crawl of this web graph with "
        "its pages' real outlinks (a bundled name such as uk-2007-05@100000, a BVGraph or "
        "an edge list; --outlinks does not apply)",
    )
    bb.add_argument("--repeats", type=int, default=3, help="runs of each; medians reported")
    bb.add_argument(
        "--runners",
        type=csv_list,
        default=("embedded", "fnapi", "prism", "flink"),
        help="embedded, fnapi, prism, flink (embedded mini cluster), flink-cluster "
        "(parallelism 1), flink-cluster-2 (parallelism 2)",
    )
    bb.add_argument(
        "--prism-location",
        default=None,
        help="default: what infra/prism/build.sh cached (~/.cache/frontierflow/prism), "
        "else the script when run from a checkout",
    )
    _flink_arguments(bb)
    bb.add_argument("--work-dir", type=Path, default=None)


def _warc_arguments(wb: argparse.ArgumentParser) -> None:
    wb.add_argument("warc", type=Path, help=".warc, .warc.gz or .arc.gz")
    wb.add_argument("--repeats", type=int, default=3, help="runs of each, medians reported")


def _shard_state_arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--sizes", type=csv_list, default=("10000", "100000", "1000000"))
    sp.add_argument("--changes", type=int, default=500, help="URLs a window changes")
    sp.add_argument("--repeats", type=int, default=3, help="runs of each, medians reported")


def _foragers_arguments(fb: argparse.ArgumentParser) -> None:
    fb.add_argument("--news", type=Path, default=Path("../shared/data/news"))
    fb.add_argument("--days", type=float, default=1.0)
    fb.add_argument("--variants", type=csv_list, default=("wl", "rl", "wlrl"))


def _urlfrontier_arguments(b: argparse.ArgumentParser) -> None:
    b.add_argument("--strategy", default="ieca", choices=URLFRONTIER_STRATEGIES[:5])
    b.add_argument("--pages", type=int, default=2000, help="page reports to put")
    b.add_argument("--outlinks", type=int, default=10, help="discovered outlinks per page")
    b.add_argument("--serve", type=int, default=5000, help="URLs to take with GetURLs")


def _flink_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--flink-master", default=None, help="HOST:PORT of a session cluster (cluster.sh start)"
    )
    parser.add_argument(
        "--worker-pool", default=None, help="HOST:PORT of infra/flink/worker_pool.py (p2)"
    )
    parser.add_argument(
        "--flink-job-server-jar",
        default=None,
        help="default: what infra/flink/fetch-job-server.sh cached "
        "(~/.cache/frontierflow/flink), else the script when run from a checkout",
    )
    parser.add_argument("--flink-conf-dir", default=None, help="default: infra/flink")


def bench(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench.engine import BenchSetup, run_bench

    if args.scale:
        return bench_scale(args)
    report = run_bench(
        BenchSetup(
            events=args.events or 20_000,
            outlinks=args.outlinks,
            urls=args.urls,
            step_size=args.step_size,
            repeats=args.repeats or 3,
            ui=args.ui,
        ),
        work_dir=args.work_dir,
    )
    print(report)
    return 0


def bench_scale(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench.scale import parse_populations, run_scale_bench
    from frontierflow.pipelines.bench.scale_state import ScaleLogSetup, ScaleSetup

    setup = ScaleSetup(
        populations=parse_populations(args.scale_urls),
        log=ScaleLogSetup(args.events or 200_000, args.outlinks, args.new_share),
        step_size=args.step_size,
        variants=tuple(args.scale_variants),
        restart=not args.no_restart,
        live_bootstrap=args.live_bootstrap,
        hold_files=args.hold_files,
        cold_files=args.cold_files,
        repeats=args.repeats or 1,
    )
    print(run_scale_bench(setup, work_dir=args.work_dir))
    return 0


def bench_kafka(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench.kafka import KafkaBenchSetup, run_kafka_bench
    from frontierflow.pipelines.bench.kafka_page import run_ui_bench

    if args.beam_stream:
        return bench_kafka_stream(args)
    setup = KafkaBenchSetup(
        bootstrap_servers=args.bootstrap_servers,
        events=args.events,
        step_size=args.step_size,
        latency_seconds=15.0 if args.latency_seconds is None else args.latency_seconds,
        ui_repeats=args.repeats,
        clients=tuple(args.kafka_client or ("auto",)),
    )
    print(run_ui_bench(setup) if args.ui else run_kafka_bench(setup))
    return 0


def bench_kafka_stream(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench.beam import INFRA, beam_version, find_runner
    from frontierflow.pipelines.bench.kafka_stream import (
        StreamBenchSetup,
        kafka_expansion_jar,
        run_stream_bench,
    )

    jar = args.flink_job_server_jar
    if jar is None:
        found = find_runner("flink", beam_version(), env=os.environ, home=Path.home())
        if found.path is None:
            raise ValueError(f"--beam-stream: no Flink job server ({found.note})")
        jar = found.path
    expansion = args.kafka_io or kafka_expansion_jar(jar)
    if args.kafka_io is None and not Path(expansion).is_file():
        raise ValueError(
            f"--beam-stream: no KafkaIO expansion service at {expansion}; "
            "`bash infra/flink/fetch-job-server.sh --kafka-expansion-service` assembles it"
        )
    conf = args.flink_conf_dir
    if conf is None and args.beam_stream == "flink" and (INFRA / "flink" / "config.yaml").is_file():
        conf = str(INFRA / "flink")
    setup = StreamBenchSetup(
        bootstrap_servers=args.bootstrap_servers,
        runner=args.beam_stream,
        flink_jar=jar,
        expansion=str(expansion),
        events=args.events,
        urls=args.urls,
        links=args.links,
        step_size=args.step_size,
        window_ms=args.clock_window_ms,
        timeout_s=args.timeout_s,
        latency_seconds=60.0 if args.latency_seconds is None else args.latency_seconds,
        latency_rate=args.latency_rate,
        flink_conf_dir=conf,
        flink_master=args.flink_master,
        worker_pool=args.worker_pool,
        job_endpoint=args.job_endpoint,
        fetch_partitions=args.fetch_partitions,
    )
    print(run_stream_bench(setup))
    return 0


def bench_shard_state(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench.shard_state import run_shard_state_bench

    sizes = [int(n) for n in args.sizes]
    if min(sizes) < 1 or args.changes < 2 or args.repeats < 1:
        raise ValueError("--sizes >= 1, --changes >= 2, --repeats >= 1")
    print(run_shard_state_bench(sizes, args.changes, args.repeats))
    return 0


def bench_beam(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench.beam import run_beam_bench

    print(
        run_beam_bench(
            args.events,
            args.runners,
            args.prism_location,
            args.flink_job_server_jar,
            args.flink_conf_dir,
            args.repeats,
            outlinks=args.outlinks,
            work_dir=args.work_dir,
            flink_master=args.flink_master,
            worker_pool=args.worker_pool,
            graph=args.graph,
        )
    )
    return 0


def bench_warc(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench.warc import bench_warc as run
    from frontierflow.pipelines.bench.warc import format_rows

    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    print(format_rows(run(args.warc, args.repeats)))
    return 0


def bench_foragers(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.evaluation.forager_bench import format_rows, run_forager_bench

    rows = run_forager_bench(args.news, args.days, tuple(args.variants))
    print(format_rows(rows, args.days))
    return 0 if all(r.same_walk for r in rows) else 1


def bench_urlfrontier(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.strategies import build_strategy
    from frontierflow.pipelines.urlfrontier.bench import run_bench

    if args.pages < 1 or args.outlinks < 0 or args.serve < 0:
        raise ValueError("--pages must be >= 1, --outlinks and --serve >= 0")
    strategy = build_strategy(args.strategy, budget=max(1000, args.pages * 10))
    result = run_bench(strategy, args.pages, args.outlinks, args.serve)
    for line in result.lines():
        print(line)
    return 0
