"""The `frontierflow` command: replay a recorded crawl, simulate crawls, benchmark."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

log = logging.getLogger("frontierflow")


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


def _ints(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in _csv(value))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated node ids: {value}") from exc


def _add_engine_args(parser: argparse.ArgumentParser, state_required: bool = True) -> None:
    """The options every engine run takes: strategy, state, budget, step, random seed."""
    parser.add_argument("--strategy", default="ieca")
    parser.add_argument(
        "--state-dir", type=Path, required=state_required, help="RocksDB state directory"
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=1_000_000,
        help="crawl budget in pages, for IECA's δ_t and the PageRank interval",
    )
    parser.add_argument("--step-size", type=int, default=500, help="events per committed step")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random strategy")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frontierflow", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    rp = sub.add_parser("replay", help="replay a FetchEvent log into frontier entries")
    rp.add_argument("log", type=Path, help="FetchEvents: Avro container file or JSON lines")
    _add_engine_args(rp, state_required=False)
    rp.add_argument(
        "--out",
        type=Path,
        required=True,
        help="FrontierEntries: .avro for an Avro container file, else JSON lines",
    )
    rp.add_argument(
        "--dead-letters",
        type=Path,
        default=None,
        help="dead-letter JSON lines (default: OUT.dead-letters.jsonl)",
    )
    rp.add_argument(
        "--runner",
        choices=("embedded", "beam"),
        default="embedded",
        help="embedded engine (RocksDB, resumable) or an Apache Beam pipeline",
    )
    rp.add_argument(
        "--beam-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="Beam pipeline option, e.g. --beam-option=--runner=FlinkRunner "
        "(repeatable); with --runner beam, OUT is a file prefix",
    )

    lp = sub.add_parser("run", help="the live engine: fetch-events in, frontier out (Kafka)")
    lp.add_argument("--bootstrap-servers", required=True, help="HOST:PORT[,HOST:PORT…]")
    _add_engine_args(lp)
    lp.add_argument(
        "--metrics-port", type=int, default=None, help="serve Prometheus metrics on 127.0.0.1:PORT"
    )
    lp.add_argument(
        "--exit-when-idle", action="store_true", help="stop once fetch-events is read to its end"
    )
    lp.add_argument("--group-id", default="frontierflow")
    lp.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="partitions of the topics the job creates when missing",
    )
    for topic, default in (
        ("fetch-events", "fetch-events"),
        ("frontier", "frontier"),
        ("fetcher-control", "fetcher-control"),
        ("dead-letter", "dead-letter"),
    ):
        lp.add_argument(f"--topic-{topic}", default=default, help=f"default: {default}")
    lp.add_argument(
        "--kafka",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="kafka-python client setting (TLS, SASL), e.g. security_protocol=SASL_SSL; repeatable",
    )

    sp = sub.add_parser("simulate", help="closed-loop crawls over a web graph")
    sp.add_argument(
        "--graph",
        default="uk-2007-05@100000",
        help="edge list (.tsv[.gz]), BVGraph basename/.graph, or a bundled name",
    )
    sp.add_argument(
        "--strategies",
        type=_csv,
        default=("ieca", "bfs", "backlink", "opic", "pagerank", "partial-pagerank", "random"),
    )
    sp.add_argument("--stop-at", type=float, default=0.45, help="fraction of pages to crawl")
    sp.add_argument("--out", type=Path, required=True, help="output directory")
    sp.add_argument("--seeds", type=_ints, default=None, help="seed node ids (default: 0)")
    sp.add_argument(
        "--random-seeds",
        type=int,
        default=None,
        metavar="N",
        help="instead of --seeds: N nodes with outlinks drawn at random (--seed)",
    )
    sp.add_argument(
        "--ieca-beta", type=float, default=None, help="IECA's β of eq. 5 (default: the paper's 0.1)"
    )
    sp.add_argument(
        "--ieca-k",
        type=int,
        default=None,
        help="IECA's k: δ_t and t step every k pages (default: budget / 40)",
    )
    sp.add_argument(
        "--budget",
        type=int,
        default=None,
        help="budget the constants scale to (default: the graph's size)",
    )
    sp.add_argument("--points", type=int, default=90, help="points on each curve")
    sp.add_argument("--seed", type=int, default=0, help="seed of the random strategy")
    sp.add_argument("--no-progress", action="store_true", help="no progress bars")

    bp = sub.add_parser("bench", help="IECA throughput with RocksDB state vs pass-through")
    bp.add_argument("--events", type=int, default=20_000)
    bp.add_argument("--outlinks", type=int, default=30)
    bp.add_argument("--urls", type=int, default=200_000, help="distinct URLs in the log")
    bp.add_argument("--step-size", type=int, default=500)
    bp.add_argument("--repeats", type=int, default=3, help="runs of each; medians reported")
    bp.add_argument("--work-dir", type=Path, default=None)
    kp = sub.add_parser("bench-kafka", help="Kafka → frontierflow → Kafka vs a no-work ceiling")
    kp.add_argument("--bootstrap-servers", required=True, help="HOST:PORT of a broker")
    kp.add_argument("--events", type=int, default=10_000)
    kp.add_argument("--step-size", type=int, default=500)
    kp.add_argument("--latency-seconds", type=float, default=15.0)
    bb = sub.add_parser("bench-beam", help="one log: embedded engine vs Beam local/Prism/Flink")
    bb.add_argument("--events", type=int, default=2_000)
    bb.add_argument("--outlinks", type=int, default=30)
    bb.add_argument("--repeats", type=int, default=3, help="runs of each; medians reported")
    bb.add_argument("--runners", type=_csv, default=("embedded", "fnapi", "prism", "flink"))
    bb.add_argument("--prism-location", default=None, help="default: infra/prism/build.sh")
    bb.add_argument("--flink-job-server-jar", default=None, help="default: infra/flink/…")
    bb.add_argument("--flink-conf-dir", default=None, help="default: infra/flink")
    bb.add_argument("--work-dir", type=Path, default=None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "replay": _replay,
        "run": _run,
        "simulate": _simulate,
        "bench": _bench,
        "bench-kafka": _bench_kafka,
        "bench-beam": _bench_beam,
    }
    try:
        return commands[args.command](args)
    except (ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return 2


def _replay(args: argparse.Namespace) -> int:
    if args.runner == "beam":
        from frontierflow.pipelines.beam_replay import run_beam_replay

        run_beam_replay(
            args.log,
            strategy_name=args.strategy,
            out_prefix=str(args.out),
            budget=args.budget,
            seed=args.seed,
            beam_args=list(args.beam_option),
        )
        log.info("wrote %s-frontier*.jsonl, -state*.jsonl, -dead-letters*.jsonl", args.out)
        return 0
    from frontierflow.pipelines.replay import replay_log

    if args.state_dir is None:
        raise ValueError("--state-dir is required with the embedded engine")

    stats = replay_log(
        args.log,
        strategy_name=args.strategy,
        state_dir=args.state_dir,
        out=args.out,
        dead_letters=args.dead_letters,
        budget=args.budget,
        step_size=args.step_size,
        seed=args.seed,
    )
    log.info(
        "replayed %d events (%d duplicates, %d dead letters): %d entries, %d removals",
        stats.events,
        stats.duplicates,
        stats.dead_letters,
        stats.entries,
        stats.removals,
    )
    return 0


def _run(args: argparse.Namespace) -> int:
    import signal
    import threading

    from frontierflow.connectors.kafka import KafkaSettings, KafkaTopics
    from frontierflow.pipelines.live import LiveOptions, run_live
    from frontierflow.pipelines.strategies import build_strategy

    settings = KafkaSettings(
        bootstrap_servers=args.bootstrap_servers,
        topics=KafkaTopics(
            fetch_events=args.topic_fetch_events,
            frontier=args.topic_frontier,
            fetcher_control=args.topic_fetcher_control,
            dead_letter=args.topic_dead_letter,
        ),
        client=_client_settings(args.kafka),
        group_id=args.group_id,
        partitions=args.partitions,
    )
    options = LiveOptions(
        step_size=args.step_size,
        metrics_port=args.metrics_port,
        exit_when_idle=args.exit_when_idle,
    )
    strategy = build_strategy(args.strategy, budget=args.budget, seed=args.seed)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_live(settings, strategy, args.state_dir, options, stop)
    return 0


def _client_settings(pairs: Sequence[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise ValueError(f"--kafka takes KEY=VALUE, got {pair!r}")
        out[key.strip()] = int(value) if value.strip().isdigit() else value
    return out


def _simulate(args: argparse.Namespace) -> int:
    from frontierflow.connectors.webgraph import read_graph
    from frontierflow.pipelines.evaluate import (
        HotPagesSetup,
        default_seeds,
        random_seeds,
        run_hot_pages,
    )

    graph = read_graph(args.graph)
    if args.random_seeds is not None:
        seeds = random_seeds(graph, args.random_seeds, args.seed)
    else:
        seeds = args.seeds or default_seeds(graph)
    ieca_overrides = {
        name: value
        for name, value in (("beta", args.ieca_beta), ("k", args.ieca_k))
        if value is not None
    }
    setup = HotPagesSetup(
        strategies=args.strategies,
        stop_at=args.stop_at,
        seeds=seeds,
        ieca_overrides=ieca_overrides,
        budget=args.budget,
        points=args.points,
        random_seed=args.seed,
        graph_name=str(args.graph),
    )
    progress = None if args.no_progress else _progress_bars
    curves = run_hot_pages(graph, setup, args.out, progress=progress)
    for curve in sorted(curves, key=lambda c: -c.hot_fraction[-1]):
        print(
            f"{curve.strategy:>18}  {curve.hot_fraction[-1]:6.1%} hot pages at "
            f"{curve.crawled_fraction[-1]:.1%} crawled"
        )
    print(f"wrote {args.out / 'hot_pages.csv'}, summary.md, hot_pages.png")
    return 0


def _progress_bars(name: str, total: int) -> Callable[..., None]:
    from tqdm import tqdm

    bar = tqdm(total=total, desc=f"{name:>18}", unit="page", mininterval=0.5, leave=True)

    def update(node: int, progress: object) -> None:
        bar.update(1)
        if bar.n >= total:
            bar.close()

    return update


def _bench(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench import BenchSetup, run_bench

    report = run_bench(
        BenchSetup(
            events=args.events,
            outlinks=args.outlinks,
            urls=args.urls,
            step_size=args.step_size,
            repeats=args.repeats,
        ),
        work_dir=args.work_dir,
    )
    print(report)
    return 0


def _bench_kafka(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench_kafka import KafkaBenchSetup, run_kafka_bench

    print(
        run_kafka_bench(
            KafkaBenchSetup(
                bootstrap_servers=args.bootstrap_servers,
                events=args.events,
                step_size=args.step_size,
                latency_seconds=args.latency_seconds,
            )
        )
    )
    return 0


def _bench_beam(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench_beam import run_beam_bench

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
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
