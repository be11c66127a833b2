"""`frontierflow fetch`: the reference fetcher between the frontier and fetch-events topics
(`frontierflow.connectors.fetcher`)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from frontierflow.pipelines.cli.common import (
    add_host_policy_args,
    add_kafka_args,
    host_policy,
    kafka_settings,
)
from frontierflow.state.traps import DEFAULT_LINK_LIMITS, LinkLimits

FETCH_TOPICS = ("fetch-events", "frontier", "fetcher-control", "dead-letter", "fetched")

log = logging.getLogger(__name__)


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    fp = sub.add_parser(
        "fetch", help="the reference fetcher: frontier in, pages over HTTP, fetch-events out"
    )
    fp.add_argument("--bootstrap-servers", required=True, help="HOST:PORT[,HOST:PORT…]")
    fp.add_argument("--fetcher-id", required=True, help="this fetcher's id (ScalingDecisions key)")
    fp.add_argument(
        "--group-id",
        default="frontierflow-fetchers",
        help="consumer group the fetchers share; the frontier's partitions are split among them",
    )
    fp.add_argument("--delay", type=float, default=1.0, help="seconds between requests to a host")
    fp.add_argument("--workers", type=int, default=4, help="concurrent fetches at start")
    fp.add_argument("--min-workers", type=int, default=1)
    fp.add_argument("--max-workers", type=int, default=32)
    fp.add_argument("--connect-timeout", type=float, default=10.0)
    fp.add_argument("--timeout", type=float, default=30.0, help="seconds for a whole request")
    fp.add_argument("--max-bytes", type=int, default=5 * 1024 * 1024, help="body size cap")
    fp.add_argument("--max-redirects", type=int, default=5)
    fp.add_argument(
        "--max-pages", type=int, default=None, help="stop after this many downloads (the budget)"
    )
    fp.add_argument(
        "--idle-exit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop when nothing was queued or in flight for this long",
    )
    fp.add_argument(
        "--resolve",
        action="append",
        default=[],
        metavar="HOST:PORT:ADDR",
        help="connect to ADDR for HOST:PORT instead of resolving HOST (like curl); repeatable",
    )
    fp.add_argument(
        "--allow-private",
        action="store_true",
        help="allow loopback and private addresses (refused by default)",
    )
    fp.add_argument(
        "--follow-hosts",
        default=None,
        help="comma-separated hosts (or host:port) whose links are kept; default: all",
    )
    fp.add_argument("--no-robots", action="store_true", help="do not read robots.txt")
    fp.add_argument(
        "--spend",
        choices=("pages", "time"),
        default="pages",
        help="pages (default): never take a worse entry while a better one waits only for "
        "its host's delay (a page budget goes to the best pages); time: take the best entry "
        "of any rested host (more pages a second)",
    )
    fp.add_argument(
        "--max-pattern-depth",
        type=int,
        default=DEFAULT_LINK_LIMITS.max_pattern_depth,
        metavar="N",
        help="a page reached through N links in a row between URLs of one pattern (the same "
        "once numbers are masked: a calendar, a pager) keeps none of its links of that "
        "pattern (a trap defence; 0: no limit; default %(default)s)",
    )
    fp.add_argument(
        "--max-url-chars",
        type=int,
        default=DEFAULT_LINK_LIMITS.max_url_chars,
        metavar="N",
        help="outlinks longer than this are not followed (0: no limit; default %(default)s)",
    )
    fp.add_argument(
        "--max-path-segments",
        type=int,
        default=DEFAULT_LINK_LIMITS.max_path_segments,
        metavar="N",
        help="outlinks with more path segments are not followed (0: no limit; default %(default)s)",
    )
    fp.add_argument(
        "--max-segment-repeats",
        type=int,
        default=DEFAULT_LINK_LIMITS.max_segment_repeats,
        metavar="N",
        help="outlinks where a run of 1-3 path segments follows itself more than N times in a "
        "row (/a/b/a/b/a/b) are not followed (0: no limit; default %(default)s)",
    )
    fp.add_argument(
        "--group-by",
        choices=("host", "ip"),
        default="host",
        help="the politeness unit: each host (default), or each server address (hosts that "
        "resolve to one IP share one request at a time, one delay, one back-off)",
    )
    fp.add_argument(
        "--max-lead",
        type=int,
        default=None,
        metavar="N",
        help="take no entry while N downloads are in flight or not yet read by the frontier: "
        "each page chosen on what the last ones taught the strategy (1: one page at a time, "
        "as a simulation; default: no bound)",
    )
    add_host_policy_args(fp)
    fp.add_argument("--user-agent", default=None)
    fp.add_argument(
        "--metrics-port", type=int, default=None, help="serve Prometheus metrics on 127.0.0.1:PORT"
    )
    add_kafka_args(fp, FETCH_TOPICS)
    fp.set_defaults(handler=fetch)


def fetch(args: argparse.Namespace) -> int:
    import signal
    import threading

    from frontierflow.connectors.fetcher.loop import Fetcher
    from frontierflow.connectors.fetcher.metrics import FetcherMetrics
    from frontierflow.connectors.fetcher.settings import (
        DEFAULT_USER_AGENT,
        FetcherSettings,
        parse_resolve,
    )

    follow = (
        frozenset(h.strip().lower() for h in args.follow_hosts.split(",") if h.strip())
        if args.follow_hosts
        else None
    )
    settings = FetcherSettings(
        fetcher_id=args.fetcher_id,
        delay_s=args.delay,
        connect_timeout_s=args.connect_timeout,
        read_timeout_s=args.timeout,
        max_bytes=args.max_bytes,
        max_redirects=args.max_redirects,
        allow_private=args.allow_private,
        resolve=parse_resolve(args.resolve),
        user_agent=args.user_agent or DEFAULT_USER_AGENT,
        robots=not args.no_robots,
        workers=args.workers,
        min_workers=args.min_workers,
        max_workers=args.max_workers,
        max_pages=args.max_pages,
        follow_hosts=follow,
        idle_exit_s=args.idle_exit,
        hosts=host_policy(args),
        spend=args.spend,
        links=LinkLimits(
            max_url_chars=args.max_url_chars,
            max_path_segments=args.max_path_segments,
            max_segment_repeats=args.max_segment_repeats,
            max_pattern_depth=args.max_pattern_depth,
        ),
        max_lead=args.max_lead,
        group_by=args.group_by,
    )
    kafka = kafka_settings(args, FETCH_TOPICS, group_id=args.group_id)
    metrics = FetcherMetrics()
    if args.metrics_port is not None:
        port = metrics.serve(args.metrics_port)
        log.info("metrics on http://127.0.0.1:%d/metrics", port)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stats = Fetcher(settings, kafka, metrics=metrics, stop=stop).run()
    log.info(
        "%d downloads, %d answered without download, %d errors",
        stats.downloads,
        stats.answered,
        stats.errors,
    )
    return 0
