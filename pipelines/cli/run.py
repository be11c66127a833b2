"""`frontierflow run`: Kafka in, Kafka out. The embedded engine (RocksDB state, its own
checkpoints, the speed controller on fetcher-control) or, with `--runner beam`, the Beam
pipelines: the exact crawl clock over fetch-events up to its current end, or the unbounded
windowed form that reads on."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from frontierflow.pipelines.cli.common import (
    NO_SPEED_CONTROLLER,
    add_engine_args,
    add_host_policy_args,
    add_kafka_args,
    add_revisit_args,
    add_ui_args,
    host_policy,
    kafka_settings,
    operators_page,
    revisit_policy,
    speed_settings,
    strategy_from_args,
)

if TYPE_CHECKING:
    from frontierflow.connectors.kafka import KafkaSettings

log = logging.getLogger(__name__)

TOPICS = ("fetch-events", "frontier", "fetcher-control", "dead-letter", "seeds", "fetched")


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    lp = sub.add_parser("run", help="the live engine: fetch-events in, frontier out (Kafka)")
    lp.add_argument("--bootstrap-servers", required=True, help="HOST:PORT[,HOST:PORT…]")
    add_engine_args(lp, state_required=False)
    lp.add_argument(
        "--metrics-port", type=int, default=None, help="serve Prometheus metrics on 127.0.0.1:PORT"
    )
    add_ui_args(lp)
    add_host_policy_args(lp)
    add_revisit_args(lp)
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
    add_kafka_args(lp, TOPICS)
    lp.add_argument(
        "--runner",
        choices=("embedded", "beam"),
        default="embedded",
        help="embedded engine (RocksDB state, needs --state-dir) or an Apache Beam pipeline",
    )
    beam = lp.add_argument_group("with --runner beam")
    beam.add_argument(
        "--clock",
        default="exact",
        help="'exact': the exact crawl clock over fetch-events up to its current end offsets "
        "(the run ends there); 'windowed:W': the unbounded form, the crawl clock refreshed "
        "every W ms of event time, reading on until the runner stops (with --exit-when-idle: "
        "up to the current end offsets)",
    )
    beam.add_argument(
        "--beam-option",
        action="append",
        default=[],
        metavar="OPTION",
        help="Beam pipeline option, e.g. --beam-option=--runner=FlinkRunner (repeatable)",
    )
    beam.add_argument(
        "--allowed-lateness-ms",
        type=int,
        default=0,
        help="with windowed:W: how far behind a partition's newest fetched_at an event may "
        "arrive before it is dead-lettered as late",
    )
    beam.add_argument(
        "--topic-state",
        default=None,
        help="with windowed:W: also write every URL's latest state to this compacted topic",
    )
    beam.add_argument(
        "--kafka-io",
        default=None,
        metavar="JAR|HOST:PORT",
        help="with windowed:W: read fetch-events through Beam's Java KafkaIO (the form that "
        "streams on Flink), from this expansion service: its launcher jar (`bash "
        "infra/flink/fetch-job-server.sh --kafka-expansion-service` prints it) or a running "
        "one. Clock windows are then of the broker's append time; reads without end",
    )
    lp.set_defaults(handler=run)


def job_kafka_settings(args: argparse.Namespace) -> KafkaSettings:
    return kafka_settings(args, TOPICS, group_id=args.group_id, partitions=args.partitions)


def run(args: argparse.Namespace) -> int:
    if args.runner == "beam":
        if args.ui_port is not None:
            raise ValueError("--ui-port: the operator's page watches the embedded engine only")
        if args.kafka_client != "auto":
            raise ValueError("--kafka-client: the Beam pipelines read and write with kafka-python")
        return _run_beam(args)
    beam_only = [
        name
        for name, given in (
            ("--clock", args.clock != "exact"),
            ("--beam-option", bool(args.beam_option)),
            ("--allowed-lateness-ms", args.allowed_lateness_ms != 0),
            ("--kafka-io", args.kafka_io is not None),
            ("--topic-state", args.topic_state is not None),
        )
        if given
    ]
    if beam_only:
        raise ValueError(f"{', '.join(beam_only)}: only with --runner beam")
    if args.state_dir is None:
        raise ValueError("--state-dir is required with the embedded engine")
    return _run_embedded(args)


def _run_embedded(args: argparse.Namespace) -> int:
    import signal
    import threading

    from frontierflow.pipelines.embedded.live import LiveOptions, run_live

    settings = job_kafka_settings(args)
    options = LiveOptions(
        step_size=args.step_size,
        metrics_port=args.metrics_port,
        exit_when_idle=args.exit_when_idle,
        speed=speed_settings(args),
        hosts=host_policy(args),
        revisit=revisit_policy(args),
    )
    strategy = strategy_from_args(args)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with operators_page(args, "run", strategy) as observer:
        run_live(settings, strategy, args.state_dir, options, stop, observer=observer)
    return 0


def _run_beam(args: argparse.Namespace) -> int:
    """Kafka → Beam → Kafka. The exact clock is one ordered pass, so it reads fetch-events
    to its current end offsets and ends; the windowed form reads on unless
    `--exit-when-idle`. The windowed form runs the crawl-speed controller as the live
    engine does (ScalingDecisions on fetcher-control); the exact clock's one ordered pass
    runs none (`replay --runner beam` decides over a log)."""
    from frontierflow.connectors.kafka import ensure_topics
    from frontierflow.pipelines.beam.event_time import parse_clock
    from frontierflow.pipelines.beam.kafka import run_beam_kafka, run_beam_kafka_stream
    from frontierflow.pipelines.beam.strategy import beam_strategy

    windows = parse_clock(args.clock)
    speed = speed_settings(args)  # refused here, before a topic is made
    if windows is None and args.speed_controller not in (None, NO_SPEED_CONTROLLER):
        raise ValueError(
            "--speed-controller: the exact-clock Beam Kafka pipeline does not run the "
            "crawl-speed controller; use --clock windowed:W, the embedded engine, or "
            "`replay --runner beam` over a log"
        )
    revisit = revisit_policy(args)
    if windows is None and (
        args.allowed_lateness_ms or args.topic_state is not None or args.kafka_io is not None
    ):
        raise ValueError(
            "--allowed-lateness-ms, --topic-state and --kafka-io need --clock windowed:W"
        )
    if args.allowed_lateness_ms < 0:
        raise ValueError(f"--allowed-lateness-ms must be >= 0, got {args.allowed_lateness_ms}")
    settings = job_kafka_settings(args)
    beam_strategy(args.strategy, budget=args.budget)  # refuses what Beam cannot run, by name
    strategy = strategy_from_args(args)
    beam_args = list(args.beam_option)
    ensure_topics(settings)
    if windows is None:
        log.info("no ScalingDecisions on fetcher-control: the exact clock runs no controller")
        run_beam_kafka(
            settings,
            strategy_name=args.strategy,
            budget=args.budget,
            beam_args=beam_args,
            until_current_end=True,
            strategy=strategy,
            hosts=host_policy(args),
            revisit=revisit,
        )
    else:
        run_beam_kafka_stream(
            settings,
            strategy_name=args.strategy,
            budget=args.budget,
            windows=windows,
            beam_args=beam_args,
            until_current_end=args.exit_when_idle,
            lateness_ms=args.allowed_lateness_ms,
            state_topic=args.topic_state,
            strategy=strategy,
            kafka_io=args.kafka_io,
            hosts=host_policy(args),
            speed=speed,
            revisit=revisit,
        )
    return 0
