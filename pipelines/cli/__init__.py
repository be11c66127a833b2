"""The `frontierflow` command: replay a recorded crawl, run on Kafka, fetch, simulate, benchmark.

One module per command group adds its sub-commands, with their arguments beside the
function that runs them (`add_commands`); `main` parses, sets up logging and calls it.
Command modules import the heavy parts (Beam, Kafka, the evaluations) only when they run.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from frontierflow.pipelines.cli import (
    bench,
    crawl_report,
    fetch,
    replay,
    run,
    seed,
    shape_link,
    simulate,
    simulate_foragers,
    simulate_speed,
    urlfrontier,
)

log = logging.getLogger("frontierflow")

DESCRIPTION = (
    "The `frontierflow` command: replay a recorded crawl, run live on Kafka, fetch over HTTP, "
    "simulate crawls, benchmark."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frontierflow", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (
        replay,
        run,
        seed,
        fetch,
        crawl_report,
        shape_link,
        simulate,
        simulate_speed,
        simulate_foragers,
        bench,
        urlfrontier,
    ):
        group.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        code: int = args.handler(args)
    except (ValueError, FileNotFoundError) as exc:
        log.error("%s", exc)
        return 2
    return code
