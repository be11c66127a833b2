"""`frontierflow crawl-report`: what a real crawl did, from its topics and the web server's
access log (`frontierflow.pipelines.evaluation.realcrawl`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from frontierflow.pipelines.cli.common import client_settings

log = logging.getLogger(__name__)


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    cp = sub.add_parser("crawl-report", help="pages/s, precision, politeness of a real crawl")
    cp.add_argument("--bootstrap-servers", required=True)
    cp.add_argument("--access-log", type=Path, required=True, help="serve.sh's access.log")
    cp.add_argument("--fetcher-id", default="f1")
    cp.add_argument("--delay", type=float, required=True, help="the fetcher's --delay")
    cp.add_argument("--topic", required=True, help="the crawl's topic (as for run/simulate)")
    cp.add_argument("--judge", type=float, default=0.75)
    cp.add_argument("--judge-min-occurrences", type=int, default=0)
    cp.add_argument("--web", default=None, help="the recorded web served (e.g. debian-docs)")
    cp.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="SERVED=RECORDED",
        help="base URL served → base URL in the recorded web; repeatable",
    )
    cp.add_argument("--topic-fetch-events", default="fetch-events")
    cp.add_argument("--topic-fetcher-control", default="fetcher-control")
    cp.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE")
    cp.set_defaults(handler=crawl_report)


def _read_topic(args: argparse.Namespace, topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap_servers.split(","),
        enable_auto_commit=False,
        **client_settings(args.kafka),
    )
    try:
        parts = [
            TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())
        ]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        values: list[bytes] = []
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            for recs in consumer.poll(timeout_ms=500).values():
                values += [r.value for r in recs if r.value is not None]
        return values
    finally:
        consumer.close()


def crawl_report(args: argparse.Namespace) -> int:
    from frontierflow.connectors.topicalweb import load_web
    from frontierflow.pipelines.cli.common import topic
    from frontierflow.pipelines.evaluation.realcrawl import (
        decision_lines,
        politeness,
        read_access_log,
        summarise,
    )
    from frontierflow.schemas.codecs import decode_record
    from frontierflow.schemas.records import FetchEvent, ScalingDecision
    from frontierflow.state.relevance import Judge

    events = [
        e
        for v in _read_topic(args, args.topic_fetch_events)
        if (e := decode_record(FetchEvent, v)).fetcher_id == args.fetcher_id
    ]
    decisions = [
        decode_record(ScalingDecision, v) for v in _read_topic(args, args.topic_fetcher_control)
    ]
    web = load_web(args.web) if args.web else None
    url_map = dict(pair.split("=", 1) for pair in args.map)
    judge = Judge(args.judge, args.judge_min_occurrences)
    s = summarise(events, topic(args.topic), judge, web, url_map)
    lines = read_access_log(args.access_log)
    polite = politeness(lines, args.delay)
    print(f"downloads {s.downloads} ({s.html_pages} HTML, {s.errors} errors), "
          f"{s.answered} answered without download (208)")  # fmt: skip
    print(f"time {s.seconds:.1f} s, {s.pages_per_s:.2f} pages/s")
    print(f"precision {s.precision:.3f} (judged on the fetcher's terms)")
    if s.precision_web is not None:
        print(
            f"precision {s.precision_web:.3f} (judged on the recorded web's terms); "
            f"{s.in_web} downloads are pages of the web, {s.terms_agree} with identical terms"
        )
    print("\n| host | requests | min gap (s) | violations | busiest second |")
    print("|---|---:|---:|---:|---:|")
    for p in polite:
        print(
            f"| {p.host} | {p.requests} | {p.min_gap_s:.3f} | {p.violations} | {p.busiest_second} |"
        )
    print()
    for row in decision_lines(decisions, args.fetcher_id):
        print(row)
    return 0
