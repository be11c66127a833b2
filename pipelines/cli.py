"""The `frontierflow` command: replay a recorded crawl, simulate crawls, benchmark."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from frontierflow.pipelines.core.strategy import Strategy
    from frontierflow.pipelines.speed.controller import ControllerSettings
    from frontierflow.pipelines.strategies.lafc import LafcSettings
    from frontierflow.state.relevance import Topic

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
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the random strategy and of LAFC's automata"
    )
    parser.add_argument(
        "--topic",
        default=None,
        help="for lafc and best-first: a named topic (sockets, memory, ...), keywords, "
        "or 'kw:weight,...'",
    )
    _add_lafc_args(parser)
    parser.add_argument(
        "--speed-controller",
        default="seed003",
        help="crawl-speed controller whose ScalingDecisions go out per fetcher and window: "
        "seed003, seed003-literal, aimd, autothrottle, fixed-N, or none",
    )
    parser.add_argument(
        "--speed-window-ms", type=int, default=10_000, help="speed statistics window length"
    )


def _speed(args: argparse.Namespace) -> ControllerSettings | None:
    from frontierflow.pipelines.speed.controller import settings_for

    if args.speed_controller == "none":
        return None
    return settings_for(args.speed_controller, window_ms=args.speed_window_ms)


def _add_lafc_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """LAFC's settings (seed 000); defaults are the paper's calibration."""
    parser.add_argument("--lafc-c", type=float, default=0.8, help="LAFC's control threshold C")
    parser.add_argument("--lafc-a", type=float, default=0.09, help="LAFC's learning rate a")
    parser.add_argument(
        "--lafc-scheme", default="L_R-I", help="LAFC's scheme: L_R-I, L_R-P or L_R-eP"
    )


def _topic(text: str) -> Topic:
    from frontierflow.state.relevance import TOPICS, Topic

    return TOPICS[text] if text in TOPICS else Topic.parse(text)


def _lafc_settings(args: argparse.Namespace, seed: int) -> LafcSettings:
    from frontierflow.pipelines.strategies.lafc import LafcSettings
    from frontierflow.state.lafc import LearningParams

    return LafcSettings(
        control_threshold=args.lafc_c,
        learning=LearningParams(a=args.lafc_a, scheme=args.lafc_scheme),
        seed=seed,
    )


def _strategy(args: argparse.Namespace) -> Strategy[Any]:
    """The strategy an engine command's options describe."""
    from frontierflow.pipelines.strategies import build_strategy

    return build_strategy(
        args.strategy,
        budget=args.budget,
        seed=args.seed,
        topic=_topic(args.topic) if args.topic is not None else None,
        lafc=_lafc_settings(args, args.seed),
    )


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
    rp.add_argument(
        "--clock",
        default="exact",
        help="with --runner beam: 'exact' (bounded: counts pages in one pass at the end) or "
        "'windowed:W' (unbounded form: the crawl clock refreshed every W ms of event time)",
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

    sp = sub.add_parser(
        "simulate", help="closed-loop crawls over a web graph (--graph) or a topical web (--web)"
    )
    sp.add_argument(
        "--graph",
        default="uk-2007-05@100000",
        help="edge list (.tsv[.gz]), BVGraph basename/.graph, or a bundled name",
    )
    sp.add_argument(
        "--strategies",
        type=_csv,
        default=None,
        help="default: ieca,bfs,backlink,opic,pagerank,partial-pagerank,random for --graph; "
        "lafc,best-first,bfs for --web",
    )
    fw = sp.add_argument_group("focused crawls of a topical web (seed 000)")
    fw.add_argument(
        "--web",
        default=None,
        help="an HTML folder, 'debian-docs' or 'debian-docs:PKG,...' (infra/debian-docs)",
    )
    fw.add_argument(
        "--topic",
        action="append",
        default=[],
        help="a named topic (sockets, memory, ...), keywords, or 'kw:weight,...'; repeatable",
    )
    fw.add_argument("--cycles", type=int, default=3, help="crawl cycles")
    fw.add_argument("--runs", type=int, default=5, help="runs of the randomised strategies")
    fw.add_argument("--judge", type=float, default=0.75, help="relevant when similarity ≥ this")
    fw.add_argument(
        "--judge-min-occurrences",
        type=int,
        default=0,
        help="relevant also needs this many keyword occurrences",
    )
    _add_lafc_args(fw)
    fw.add_argument(
        "--web-seeds", type=_csv, default=(), help="seed URLs (default: each host's index)"
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

    sv = sub.add_parser(
        "simulate-speed", help="thread-scaling controllers (seed 003) on bandwidth traces"
    )
    sv.add_argument(
        "--trace",
        type=Path,
        default=Path("../shared/data/bandwidth"),
        help="a time_s<TAB>Mbps trace file, or a folder of them (searched recursively)",
    )
    sv.add_argument(
        "--controllers",
        type=_csv,
        default=("seed003", "seed003-literal", "aimd", "autothrottle", "fixed-4", "fixed-16"),
        help="seed003, seed003-literal, aimd, autothrottle, fixed-N",
    )
    sv.add_argument("--out", type=Path, required=True, help="output directory")
    sv.add_argument("--max-traces", type=int, default=None, help="only the first N traces")
    sv.add_argument("--duration", type=float, default=None, help="seconds (default: one pass)")
    sv.add_argument("--window-ms", type=int, default=None, help="statistics window length")
    sv.add_argument("--seed", type=int, default=0, help="seed of the simulated world")
    sv.add_argument("--workers", type=int, default=2, help="processes")
    sv.add_argument("--plots", type=int, default=-1, help="traces to plot (-1: all)")

    bp = sub.add_parser(
        "bench", help="IECA throughput with RocksDB state vs pass-through and raw fastavro"
    )
    bp.add_argument("--events", type=int, default=None, help="20,000; with --scale 200,000")
    bp.add_argument("--outlinks", type=int, default=30)
    bp.add_argument("--urls", type=int, default=200_000, help="distinct URLs in the log")
    bp.add_argument("--step-size", type=int, default=500)
    bp.add_argument(
        "--repeats", type=int, default=None, help="runs of each, medians reported: 3; --scale 1"
    )
    bp.add_argument("--work-dir", type=Path, default=None)
    bp.add_argument(
        "--scale",
        action="store_true",
        help="IECA + RocksDB only, at each --scale-urls population: events/s, ratio, peak RSS",
    )
    bp.add_argument("--scale-urls", type=_csv, default=("1000000", "10000000"))
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
    bb.add_argument(
        "--prism-location",
        default=None,
        help="default: what infra/prism/build.sh cached (~/.cache/frontierflow/prism), "
        "else the script when run from a checkout",
    )
    bb.add_argument(
        "--flink-job-server-jar",
        default=None,
        help="default: what infra/flink/fetch-job-server.sh cached "
        "(~/.cache/frontierflow/flink), else the script when run from a checkout",
    )
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
        "simulate-speed": _simulate_speed,
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
    if args.runner == "beam" and args.clock != "exact":
        from frontierflow.pipelines.beam.stream import parse_clock, run_beam_stream_replay

        run_beam_stream_replay(
            str(args.log),
            strategy_name=args.strategy,
            out_prefix=str(args.out),
            budget=args.budget,
            windows=parse_clock(args.clock),
            seed=args.seed,
            beam_args=list(args.beam_option),
        )
        return 0
    if args.runner == "beam":
        from frontierflow.pipelines.beam.replay import run_beam_replay

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
    from frontierflow.pipelines.embedded.replay import replay_log

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
        strategy=_strategy(args),
        speed=_speed(args),
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
    from frontierflow.pipelines.embedded.live import LiveOptions, run_live

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
        speed=_speed(args),
    )
    strategy = _strategy(args)
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


def _simulate_web(args: argparse.Namespace) -> int:
    from frontierflow.connectors.topicalweb import load_web
    from frontierflow.pipelines.evaluation.focused import FocusedSetup, run_focused
    from frontierflow.state.relevance import TOPICS, Judge

    topics = [_topic(t) for t in args.topic]
    if not topics:
        raise ValueError(f"--web needs --topic (named topics: {', '.join(TOPICS)})")
    setup = FocusedSetup(
        strategies=args.strategies or ("lafc", "best-first", "bfs"),
        budget=args.budget or 2000,
        cycles=args.cycles,
        points=min(args.points, 10),
        runs=args.runs,
        judge=Judge(threshold=args.judge, min_occurrences=args.judge_min_occurrences),
        lafc=_lafc_settings(args, 0),
        seeds=args.web_seeds,
    )
    web = load_web(args.web)
    results = run_focused(web, topics, setup, args.out, str(args.web))
    for r in results:
        for c in r.curves:
            if c.cycle == setup.cycles - 1:
                print(
                    f"{r.topic:>14} {c.strategy:>12} cycle {c.cycle + 1}: precision "
                    f"{c.precision[-1]:.3f}, recall {c.recall[-1]:.3f} (pooled), "
                    f"{c.recall_all[-1]:.3f} (all reachable)"
                )
    print(f"wrote {args.out}/summary.md, focused.csv, precision_*.png")
    return 0


def _simulate(args: argparse.Namespace) -> int:
    if args.web is not None:
        return _simulate_web(args)
    from frontierflow.connectors.webgraph import read_graph
    from frontierflow.pipelines.evaluation.hot_pages import (
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
        strategies=args.strategies
        or ("ieca", "bfs", "backlink", "opic", "pagerank", "partial-pagerank", "random"),
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


def _simulate_speed(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.evaluation.speed import SpeedEvalSetup, run_speed_eval
    from frontierflow.pipelines.evaluation.speedsim import find_traces

    traces = find_traces(args.trace)
    if args.max_traces is not None:
        traces = traces[: args.max_traces]
    if not traces:
        raise ValueError(f"no traces under {args.trace}")
    overrides = () if args.window_ms is None else (("window_ms", args.window_ms),)
    setup = SpeedEvalSetup(
        traces=tuple(traces),
        controllers=args.controllers,
        duration_s=args.duration,
        seed=args.seed,
        workers=args.workers,
        plots=args.plots,
        overrides=overrides,
    )
    run_speed_eval(setup, args.out)
    print((args.out / "summary.md").read_text())
    print(f"wrote {args.out / 'runs.csv'}, summary.csv, summary.md, plots/")
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
    from frontierflow.pipelines.bench.engine import BenchSetup, run_bench

    if args.scale:
        return _bench_scale(args)
    report = run_bench(
        BenchSetup(
            events=args.events or 20_000,
            outlinks=args.outlinks,
            urls=args.urls,
            step_size=args.step_size,
            repeats=args.repeats or 3,
        ),
        work_dir=args.work_dir,
    )
    print(report)
    return 0


def _bench_scale(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench.scale import ScaleSetup, parse_populations, run_scale_bench

    setup = ScaleSetup(
        populations=parse_populations(args.scale_urls),
        events=args.events or 200_000,
        outlinks=args.outlinks,
        step_size=args.step_size,
        repeats=args.repeats or 1,
    )
    print(run_scale_bench(setup, work_dir=args.work_dir))
    return 0


def _bench_kafka(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.bench.kafka import KafkaBenchSetup, run_kafka_bench

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
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
