"""`frontierflow urlfrontier`: serve the URL Frontier gRPC API (StormCrawler's frontier) from
an embedded engine on a RocksDB state directory."""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from frontierflow.pipelines.cli.common import (
    add_kafka_args,
    add_lafc_args,
    add_revisit_args,
    revisit_policy,
    topic,
)

if TYPE_CHECKING:
    from frontierflow.pipelines.core.strategy import Strategy
    from frontierflow.pipelines.urlfrontier.frontier import Frontier, FrontierSettings
    from frontierflow.state.storage.store import StateStore

log = logging.getLogger(__name__)

KAFKA_TOPICS = ("fetch-events", "frontier")

STRATEGIES = ("ieca", "bfs", "opic", "backlink", "random", "lafc", "best-first")
"""What works over this API: the PageRank baselines recompute over all state (not per put)
and are left out; lafc and best-first need the page text in `text`/`terms` metadata."""


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    p = sub.add_parser(
        "urlfrontier", help="serve the URL Frontier gRPC API from an embedded engine"
    )
    p.add_argument("--port", type=int, default=7071, help="gRPC port (0: any free port)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on")
    p.add_argument("--state-dir", required=True, help="RocksDB state directory")
    p.add_argument(
        "--bootstrap-servers",
        default=None,
        help="HOST:PORT[,…]: publish FetchEvents to a live `frontierflow run` job and follow "
        "its frontier topic instead of running an embedded engine",
    )
    add_kafka_args(p.add_argument_group("with --bootstrap-servers"), KAFKA_TOPICS)
    p.add_argument("--strategy", default="ieca", choices=STRATEGIES)
    p.add_argument("--budget", type=int, default=1_000_000, help="crawl budget (IECA's δ_t)")
    p.add_argument("--seed", type=int, default=0, help="seed of random and LAFC")
    p.add_argument("--topic", default=None, help="for lafc and best-first")
    add_lafc_args(p)
    add_revisit_args(p)
    p.add_argument(
        "--lock-seconds",
        type=int,
        default=30,
        help="how long a served URL stays locked when GetURLs asks for 0",
    )
    p.add_argument(
        "--outlink-timeout",
        type=float,
        default=60.0,
        help="seconds discovered URLs wait for their parent's report before being seeded",
    )
    p.add_argument("--workers", type=int, default=8, help="gRPC worker threads")
    p.add_argument(
        "--port-file", default=None, help="write the bound port here once serving (for scripts)"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import signal
    import threading
    from dataclasses import replace
    from pathlib import Path

    from frontierflow.pipelines.cli.common import lafc_settings
    from frontierflow.pipelines.strategies import build_strategy
    from frontierflow.pipelines.urlfrontier.frontier import Frontier, FrontierSettings
    from frontierflow.pipelines.urlfrontier.service import serve
    from frontierflow.state.storage.rocksdb import RocksDBStore

    strategy = build_strategy(
        args.strategy,
        budget=args.budget,
        seed=args.seed,
        topic=topic(args.topic) if args.topic is not None else None,
        lafc=lafc_settings(args, args.seed),
    )
    revisit = revisit_policy(args)
    if revisit is not None and args.bootstrap_servers is not None:
        raise ValueError("--revisit with --bootstrap-servers: give it to the live job instead")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    families = Frontier.families_for(strategy, revisit is not None)
    with RocksDBStore(Path(args.state_dir), families) as store:
        settings = FrontierSettings(
            default_lock_s=args.lock_seconds,
            outlink_timeout_s=args.outlink_timeout,
            node=f"{args.host}:{args.port}",
            revisit=revisit,
        )
        frontier = _frontier(args, strategy, store, settings)
        server, port, flusher = serve(
            frontier, f"{args.host}:{args.port}", max_workers=args.workers
        )
        frontier.settings = replace(settings, node=f"{args.host}:{port}")
        log.info(
            "URL Frontier (%s) on %s:%d, state in %s",
            args.strategy,
            args.host,
            port,
            args.state_dir,
        )
        if args.port_file:
            Path(args.port_file).write_text(f"{port}\n")
        stop.wait()
        log.info("stopping")
        flusher.set()
        server.stop(grace=5).wait(10)
        frontier.close()
    return 0


def _frontier(
    args: argparse.Namespace,
    strategy: Strategy[Any],
    store: StateStore,
    settings: FrontierSettings,
) -> Frontier:
    """The embedded frontier, or with --bootstrap-servers the one in front of a live job."""
    from frontierflow.pipelines.urlfrontier.frontier import Frontier

    if args.bootstrap_servers is None:
        return Frontier(strategy, store, settings)
    from frontierflow.pipelines.cli.common import kafka_settings
    from frontierflow.pipelines.urlfrontier.kafka import KAFKA_STRATEGIES, KafkaFrontier

    if args.strategy not in KAFKA_STRATEGIES:
        raise ValueError(
            f"--strategy {args.strategy}: with Kafka only {', '.join(KAFKA_STRATEGIES)} "
            "(their seeds need no state)"
        )
    kafka = kafka_settings(args, KAFKA_TOPICS)
    return KafkaFrontier(strategy, store, kafka, settings)
