"""`frontierflow crawl-report`: what a real crawl did, from its topics and the web server's
access log (`frontierflow.pipelines.evaluation.realcrawl`)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frontierflow.pipelines.cli.common import add_kafka_args, kafka_settings

if TYPE_CHECKING:
    from frontierflow.connectors.kafka import KafkaSettings
    from frontierflow.pipelines.evaluation.realcrawl import AccessLine
    from frontierflow.pipelines.evaluation.simulator import RecordedWeb
    from frontierflow.schemas.records import FetchEvent, ScalingDecision
    from frontierflow.state.relevance import Judge, Topic

log = logging.getLogger(__name__)

REPORT_TOPICS = ("fetch-events", "fetcher-control")


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    cp = sub.add_parser(
        "crawl-report",
        help="pages/s, precision, politeness, pauses and budget per host of a real crawl",
    )
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
    cp.add_argument(
        "--shaper-log", type=Path, default=None, help="shape-link's --log: report the bandwidth"
    )
    cp.add_argument("--trace", type=Path, default=None, help="shape-link's --trace")
    cp.add_argument("--rate-scale", type=float, default=1.0, help="shape-link's --rate-scale")
    cp.add_argument("--speedup", type=float, default=1.0, help="shape-link's --speedup")
    cp.add_argument(
        "--speed-window-ms", type=int, default=10_000, help="the job's, for the simulator"
    )
    add_kafka_args(cp, REPORT_TOPICS)
    cp.set_defaults(handler=crawl_report)


def read_topic(settings: KafkaSettings, topic: str) -> list[bytes]:
    """Every value of `topic`, from its beginning to its current end, through the settings'
    Kafka client library."""
    from frontierflow.connectors.kafka import open_reader
    from frontierflow.connectors.kafka_client import read_to_end

    reader = open_reader(settings)
    try:
        return [r.value for r in read_to_end(reader, topic) if r.value is not None]
    finally:
        reader.close()


def crawl_report(args: argparse.Namespace) -> int:
    from frontierflow.connectors.topicalweb import load_web
    from frontierflow.pipelines.cli.common import topic
    from frontierflow.pipelines.evaluation.realcrawl import read_access_log
    from frontierflow.schemas.codecs import decode_record
    from frontierflow.schemas.records import FetchEvent, ScalingDecision
    from frontierflow.state.relevance import Judge

    settings = kafka_settings(args, REPORT_TOPICS)
    events = [
        e
        for v in read_topic(settings, settings.topics.fetch_events)
        if (e := decode_record(FetchEvent, v)).fetcher_id == args.fetcher_id
    ]
    decisions = [
        decode_record(ScalingDecision, v)
        for v in read_topic(settings, settings.topics.fetcher_control)
    ]
    lines = read_access_log(args.access_log)
    print_report(
        events,
        decisions,
        lines,
        delay_s=args.delay,
        fetcher_id=args.fetcher_id,
        topic=topic(args.topic),
        judge=Judge(args.judge, args.judge_min_occurrences),
        web=load_web(args.web) if args.web else None,
        url_map=dict(pair.split("=", 1) for pair in args.map),
    )
    if args.shaper_log is not None:
        _shaped_report(
            args, lines, events, [d for d in decisions if d.fetcher_id == args.fetcher_id]
        )
    return 0


def print_report(
    events: list[FetchEvent],
    decisions: list[ScalingDecision],
    lines: list[AccessLine],
    *,
    delay_s: float,
    fetcher_id: str,
    topic: Topic | None,
    judge: Judge,
    web: RecordedWeb | None = None,
    url_map: dict[str, str] | None = None,
) -> None:
    """The report of one fetcher's crawl on stdout: downloads, pages/s, precision (with a
    topic), push-back and where the budget went, politeness per host against `delay_s` from
    the requests in `lines`, the thread decisions."""
    from frontierflow.pipelines.evaluation.realcrawl import decision_lines, politeness, summarise

    s = summarise(events, topic, judge, web, url_map)
    polite = politeness(lines, delay_s)
    print(f"downloads {s.downloads} ({s.html_pages} HTML, {s.errors} errors), "
          f"{s.answered} answered without download (208)")  # fmt: skip
    print(f"time {s.seconds:.1f} s, {s.pages_per_s:.2f} pages/s")
    if topic is not None:
        print(f"precision {s.precision:.3f} (judged on the fetcher's terms)")
    if s.precision_web is not None:
        print(
            f"precision {s.precision_web:.3f} (judged on the recorded web's terms); "
            f"{s.in_web} downloads are pages of the web, {s.terms_agree} with identical terms"
        )
    _pushback_report(events, lines)
    print("\n| host | requests | min gap (s) | violations | busiest second |")
    print("|---|---:|---:|---:|---:|")
    for p in polite:
        print(
            f"| {p.host} | {p.requests} | {p.min_gap_s:.3f} | {p.violations} | {p.busiest_second} |"
        )
    print()
    for row in decision_lines(decisions, fetcher_id):
        print(row)


def _pushback_report(events: Any, lines: Any, top: int = 15) -> None:
    """Requests inside announced pauses, and where the budget went, busiest hosts first."""
    from frontierflow.pipelines.evaluation.pushback import (
        announced_pauses,
        host_budgets,
        requests_inside_pauses,
    )

    pauses = announced_pauses(events)
    inside = requests_inside_pauses(lines, pauses)
    budgets = host_budgets(events, lines)
    announced = sum(map(len, pauses.values()))
    print(f"\nrequests inside an announced pause: {len(inside)} "
          f"({announced} pauses announced by {len(pauses)} hosts)")  # fmt: skip
    if budgets:
        busiest = budgets[0]
        print(f"busiest host: {busiest.host}, {busiest.share:.1%} of the downloads")
    print("\n| host | downloads | share | 429/503 | pauses | requests inside a pause |")
    print("|---|---:|---:|---:|---:|---:|")
    for b in budgets[:top]:
        print(f"| {b.host} | {b.downloads} | {b.share:.1%} | {b.pushed_back} | {b.pauses} "
              f"| {b.inside_pause} |")  # fmt: skip


def _shaped_report(args: argparse.Namespace, lines: Any, events: Any, decisions: Any) -> None:
    from frontierflow.pipelines.evaluation.shapedcrawl import fitted_world, shaped_crawl, simulated
    from frontierflow.pipelines.evaluation.shaping import ShapeLog
    from frontierflow.pipelines.evaluation.speedsim import SimSettings, read_trace
    from frontierflow.pipelines.speed.settings import settings_for

    shaped = shaped_crawl(
        ShapeLog.read(args.shaper_log), lines, events, decisions, args.speed_window_ms / 1000
    )
    print(f"\nshaped link: {shaped.seconds:.1f} s, {shaped.allowed_bytes / 1e6:.1f} MB allowed, "
          f"{shaped.wire_bytes / 1e6:.1f} MB on the wire ({shaped.wire_share:.1%}), "
          f"{shaped.page_bytes / 1e6:.1f} MB of pages ({shaped.page_share:.1%}); "
          f"{shaped.downloads} downloads, {shaped.pages_per_s:.2f} pages/s; "
          f"{shaped.decisions} decisions, {shaped.thread_changes} thread changes")  # fmt: skip
    print("\n| t (s) | capacity (Mbit/s) | link carried (Mbit/s) | pages | threads |")
    print("|---:|---:|---:|---:|---:|")
    for w in shaped.windows:
        threads = "" if w.threads is None else w.threads
        print(f"| {w.start_s:.0f} | {w.capacity_mbps:.2f} | {w.carried_mbps:.2f} | {w.pages} "
              f"| {threads} |")  # fmt: skip
    if args.trace is None:
        return
    trace = read_trace(args.trace).scaled(args.rate_scale, args.speedup)
    settings = settings_for("hypothesis", window_ms=args.speed_window_ms)
    print(
        "\n| simulator (hypothesis, same trace) | capacity used | pages/s | thread changes "
        "| mean threads |"
    )
    print("|---|---:|---:|---:|---:|")
    for label, world in (
        ("its own world (40 hosts)", SimSettings()),
        ("fitted to this crawl", fitted_world(lines, args.delay)),
    ):
        m = simulated(trace, settings, world, label)
        changes = m.thread_changes_per_h * m.duration_s / 3600
        print(f"| {label} | {m.capacity_share:.1%} | {m.pages_per_s:.2f} | {changes:.0f} "
              f"| {m.mean_threads:.1f} |")  # fmt: skip
