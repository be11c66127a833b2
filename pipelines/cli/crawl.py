"""`frontierflow crawl URL…`: a live crawl in one command. The local Kafka broker (unless
`--bootstrap-servers` names one), the live job, the seeds, one reference fetcher and the
operator's page, all under one state folder; progress on stderr, the crawl report on stdout
at the end. Run it again on the same folder and the crawl goes on where it stopped.

The options are read once into a `CrawlSettings` (`crawl_settings`), which
`crawl_run.run_crawl` runs. What a later run must agree with — the strategy, its topic, the
crawl id, the hosts followed — is kept in the state folder (`crawl.json`)."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from frontierflow.pipelines.cli.common import (
    add_engine_args,
    add_kafka_args,
    add_revisit_args,
    client_settings,
    revisit_policy,
    speed_settings,
    strategy_from_args,
    topic,
)
from frontierflow.pipelines.cli.crawl_settings import FETCHER_ID, CrawlSettings

log = logging.getLogger(__name__)

TOPICS = ("fetch-events", "frontier", "fetcher-control", "dead-letter", "seeds", "fetched")
DEFAULT_STATE_DIR = Path("frontierflow-crawl")
DEFAULT_STRATEGY = "ieca"
DEFAULT_UI_PORT = 8080
RECORD = "crawl.json"
"""The crawl's identity in the state folder, checked by every later run."""
ALL_HOSTS = "*"


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    cp = sub.add_parser(
        "crawl",
        help="a live crawl in one command: broker, job, seeds, fetcher, operator's page",
        description="Crawl from URL… with the live job and one reference fetcher, showing the "
        "operator's page, until the page budget is spent, nothing is left to fetch or Ctrl-C; "
        "then print the crawl report. Everything is kept in --state-dir: run again on it to "
        "go on with the same crawl.",
    )
    cp.add_argument(
        "urls",
        nargs="*",
        metavar="URL",
        help="starting pages (absolute http(s)); optional when going on with a crawl",
    )
    add_engine_args(cp, state_required=False)
    cp.set_defaults(state_dir=DEFAULT_STATE_DIR, strategy=None, budget=None)
    cp.add_argument(
        "--max-pages",
        type=int,
        default=1000,
        help="pages to download in this run (default 1000); on a crawl's first run also the "
        "strategy's --budget unless given",
    )
    cp.add_argument(
        "--bootstrap-servers",
        default=None,
        help="a running Kafka broker; default: start the local one (Java 17+ and Maven), "
        "its data in STATE_DIR/kafka",
    )
    cp.add_argument("--crawl-id", default=None, help="default: 'default'")
    add_revisit_args(cp)
    fetcher = cp.add_argument_group("the fetcher")
    fetcher.add_argument(
        "--delay", type=float, default=1.0, help="seconds between requests to a host (default 1)"
    )
    fetcher.add_argument("--workers", type=int, default=4, help="concurrent fetches at start")
    fetcher.add_argument("--max-workers", type=int, default=32)
    fetcher.add_argument(
        "--idle-exit",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="end the crawl when nothing was queued or in flight for this long (default 30)",
    )
    fetcher.add_argument(
        "--follow-hosts",
        default=None,
        help="comma-separated hosts (or host:port) whose links are followed; default: the "
        f"starting pages' hosts (of this run and the earlier ones); '{ALL_HOSTS}': every host",
    )
    fetcher.add_argument(
        "--resolve",
        action="append",
        default=[],
        metavar="HOST:PORT:ADDR",
        help="connect to ADDR for HOST:PORT instead of resolving HOST (like curl); repeatable",
    )
    fetcher.add_argument(
        "--allow-private",
        action="store_true",
        help="allow loopback and private addresses (refused by default)",
    )
    fetcher.add_argument("--user-agent", default=None)
    page = cp.add_argument_group("the operator's page")
    page.add_argument(
        "--ui-port",
        type=int,
        default=None,
        help=f"serve it on http://UI_HOST:PORT/ (default {DEFAULT_UI_PORT}, or a free port "
        "when that one is taken; 0: a free port)",
    )
    page.add_argument("--ui-host", default="127.0.0.1", help="default: loopback only")
    page.add_argument("--no-ui", action="store_true", help="no operator's page")
    cp.add_argument(
        "--progress-every",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how often a progress line is written when stderr is not a terminal",
    )
    add_kafka_args(cp, TOPICS)
    cp.set_defaults(handler=crawl)


def crawl(args: argparse.Namespace) -> int:
    from frontierflow.connectors.kafka_client import BrokerError
    from frontierflow.pipelines.cli.crawl_run import CrawlFailed, run_crawl
    from frontierflow.pipelines.cli.local_broker import BrokerUnavailable

    settings = crawl_settings(args)
    try:
        with _quiet_components(not args.verbose):
            run_crawl(settings)
    except BrokerUnavailable as exc:
        log.error("the local Kafka broker did not start: %s", exc)
        return 2
    except BrokerError as exc:
        where = settings.bootstrap_servers or "the local broker"
        log.error(
            "the Kafka broker at %s did not answer (%s): is it running? Without "
            "--bootstrap-servers the crawl starts a broker of its own",
            where,
            exc,
        )
        return 2
    except CrawlFailed as exc:
        log.error("%s", exc)
        return 1
    except KeyboardInterrupt:  # while the broker started: it was stopped
        log.error("interrupted")
        return 130
    return 0


@contextlib.contextmanager
def _quiet_components(quiet: bool) -> Iterator[None]:
    """Only the components' warnings while the crawl runs (the progress line says what their
    logs would)."""
    names = ("frontierflow", "kafka")
    levels = {name: logging.getLogger(name).level for name in names}
    if quiet:
        for name in names:
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def crawl_settings(args: argparse.Namespace) -> CrawlSettings:
    """The options, checked against what the state folder says of an earlier run (and
    recorded there on the first); ValueError for what does not fit."""
    from frontierflow.connectors.fetcher.settings import (
        DEFAULT_USER_AGENT,
        FetcherSettings,
        parse_resolve,
    )
    from frontierflow.connectors.kafka import KafkaTopics
    from frontierflow.state.urls import is_http_url

    bad = [u for u in args.urls if not is_http_url(u)]
    if bad:
        raise ValueError(f"not absolute http(s) URLs: {bad}")
    record, changed = _crawl_record(args)
    if args.max_pages < 1:
        raise ValueError(f"--max-pages must be >= 1, got {args.max_pages}")
    args.strategy, args.topic, args.budget = record["strategy"], record["topic"], record["budget"]
    follow = record["follow_hosts"]
    fetcher = FetcherSettings(
        fetcher_id=FETCHER_ID,
        delay_s=args.delay,
        allow_private=args.allow_private,
        resolve=parse_resolve(args.resolve),
        user_agent=args.user_agent or DEFAULT_USER_AGENT,
        workers=args.workers,
        max_workers=max(args.max_workers, args.workers),
        max_pages=args.max_pages,
        follow_hosts=None if follow is None else frozenset(follow),
        idle_exit_s=args.idle_exit,
    )
    names = {t.replace("-", "_"): getattr(args, "topic_" + t.replace("-", "_")) for t in TOPICS}
    ui_port = None if args.no_ui else args.ui_port
    if not args.no_ui and ui_port is None:
        ui_port = DEFAULT_UI_PORT
    if args.progress_every <= 0:
        raise ValueError(f"--progress-every must be > 0, got {args.progress_every}")
    settings = CrawlSettings(
        seeds=tuple(args.urls),
        state_dir=args.state_dir,
        strategy=strategy_from_args(args),
        topic=None if args.topic is None else topic(args.topic),
        crawl_id=record["crawl_id"],
        fetcher=fetcher,
        bootstrap_servers=args.bootstrap_servers,
        topics=KafkaTopics(**names),
        kafka_client=client_settings(args.kafka),
        client_library=args.kafka_client,
        speed=speed_settings(args),
        revisit=revisit_policy(args),
        step_size=args.step_size,
        ui_port=ui_port,
        ui_host=args.ui_host,
        ui_port_fallback=not args.no_ui and args.ui_port is None,
        progress_every_s=args.progress_every,
    )
    if changed:
        args.state_dir.mkdir(parents=True, exist_ok=True)
        (args.state_dir / RECORD).write_text(json.dumps(record, indent=2) + "\n")
    return settings


def _crawl_record(args: argparse.Namespace) -> tuple[dict[str, Any], bool]:
    """What the state folder's crawl is, and whether the record changed. Its identity —
    strategy, topic, crawl id, budget — is set by the first run and refused when a later one
    gives another. The hosts followed are remembered: a later run follows them and the
    hosts of its new URLs, or what its --follow-hosts says."""
    path = args.state_dir / RECORD
    given = {
        "strategy": args.strategy,
        "topic": args.topic,
        "crawl_id": args.crawl_id,
        "budget": args.budget,
    }
    if not path.exists():
        if not args.urls:
            raise ValueError(f"no crawl in {args.state_dir} yet: give the starting URLs")
        record = {
            "strategy": args.strategy or DEFAULT_STRATEGY,
            "topic": args.topic,
            "crawl_id": args.crawl_id or "default",
            "budget": args.budget or args.max_pages,
            "follow_hosts": _follow_hosts(args.follow_hosts, args.urls, []),
        }
        return record, True
    record = json.loads(path.read_text())
    for name, value in given.items():
        if value is not None and value != record[name]:
            option = "--" + name.replace("_", "-")
            raise ValueError(
                f"{option}: {args.state_dir} holds a crawl with {option} {record[name]}; "
                "give the same (or leave it out), or another --state-dir"
            )
    follow = _follow_hosts(args.follow_hosts, args.urls, record["follow_hosts"])
    changed = follow != record["follow_hosts"]
    return {**record, "follow_hosts": follow}, changed


def _follow_hosts(
    option: str | None, urls: list[str], before: list[str] | None
) -> list[str] | None:
    """`--follow-hosts` as a sorted list (None: every host); by default the hosts followed
    `before` and those of the URLs."""
    if option is None:
        if before is None:
            return None
        return sorted({*before, *(urlsplit(u).netloc.lower() for u in urls)})
    if option.strip() == ALL_HOSTS:
        return None
    return sorted({h.strip().lower() for h in option.split(",") if h.strip()})
