"""`frontierflow seed`: starting pages for a crawl, or a new crawl cycle, on the seeds topic
the live job reads (`frontierflow run`)."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from frontierflow.pipelines.cli.common import add_kafka_args, kafka_settings

if TYPE_CHECKING:
    from frontierflow.connectors.kafka import KafkaSettings

log = logging.getLogger(__name__)


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    sp = sub.add_parser("seed", help="publish starting pages (or a new crawl cycle) to the job")
    sp.add_argument("urls", nargs="+", metavar="URL", help="absolute http(s) URLs")
    sp.add_argument("--bootstrap-servers", required=True, help="HOST:PORT[,HOST:PORT…]")
    sp.add_argument("--crawl-id", default="default")
    sp.add_argument(
        "--cycle",
        type=int,
        default=0,
        help="crawl cycle the seeds start (the last cycle + 1 starts a new one)",
    )
    add_kafka_args(sp, ("seeds",))
    sp.set_defaults(handler=seed)


def seed(args: argparse.Namespace) -> int:
    if args.cycle < 0:
        raise ValueError(f"--cycle must be >= 0, got {args.cycle}")
    send_seeds(kafka_settings(args, ("seeds",)), args.urls, args.crawl_id, args.cycle)
    log.info("%d seeds for crawl %s cycle %d sent", len(args.urls), args.crawl_id, args.cycle)
    return 0


def send_seeds(settings: KafkaSettings, urls: Sequence[str], crawl_id: str, cycle: int) -> None:
    """One SeedRequest per URL on the seeds topic, through the settings' Kafka client
    library, each acknowledged by the broker (BrokerError otherwise); a ValueError names the
    URLs that are not absolute http(s)."""
    from frontierflow.connectors.kafka import open_writer
    from frontierflow.schemas.codecs import encode_record
    from frontierflow.schemas.records import SeedRequest
    from frontierflow.state.urls import is_http_url

    bad = [u for u in urls if not is_http_url(u)]
    if bad:
        raise ValueError(f"not absolute http(s) URLs: {bad}")
    writer = open_writer(settings)
    try:
        now = int(time.time() * 1000)
        for url in urls:
            seed = SeedRequest(url, now, crawl_id, cycle)
            writer.send(settings.topics.seeds, url.encode(), encode_record(seed))
        writer.flush()
    finally:
        writer.close()
