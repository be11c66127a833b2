"""The `frontierflow` command: replay a recorded crawl, run on Kafka, fetch, simulate, benchmark.

One module per command group adds its sub-commands, with their arguments beside the
function that runs them (`add_commands`); `main` parses, sets up logging and calls it.
Command modules import the heavy parts (Beam, Kafka, the evaluations) only when they run;
a missing optional library ends in a line naming the extra to install (`extras`).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from frontierflow.pipelines.cli import (
    bench,
    crawl,
    crawl_report,
    fetch,
    renamed,
    replay,
    run,
    seed,
    shape_link,
    simulate,
    urlfrontier,
)
from frontierflow.pipelines.cli.extras import missing_extra

log = logging.getLogger("frontierflow")

DESCRIPTION = (
    "The `frontierflow` command: replay a recorded crawl, run live on Kafka, fetch over HTTP, "
    "simulate crawls, benchmark."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frontierflow", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.set_defaults(renamed=None)
    # COMMAND, not the list of every name: the old names stay out of --help
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # the product first, then the tools that measure it
    product = (crawl, run, seed, fetch, replay, urlfrontier, crawl_report)
    for group in (*product, simulate, bench, shape_link):
        group.add_commands(sub)
    _name_commands(parser)
    return parser


def _name_commands(parser: argparse.ArgumentParser) -> None:
    """Give each command's namespace its command line (`frontierflow bench warc`), for the
    messages that name it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                command.set_defaults(command_line=command.prog)
                _name_commands(command)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.renamed is not None:
        renamed.note(*args.renamed)
    try:
        code: int = args.handler(args)
    except (ImportError, ValueError, FileNotFoundError) as exc:
        return _failed(args, exc)
    return code


def _failed(args: argparse.Namespace, error: Exception) -> int:
    """Exit code 2 for what the user can fix: a missing optional library (the extra to
    install, on one line) or a bad option or file (logged); anything else is re-raised."""
    missing = missing_extra(error)
    if missing is not None:
        print(missing.message(args.command_line), file=sys.stderr)
        return 2
    if isinstance(error, ImportError):
        raise error
    log.error("%s", error)
    return 2
