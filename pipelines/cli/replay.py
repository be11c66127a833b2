"""`frontierflow replay`: a recorded FetchEvent log through the embedded engine (RocksDB
state, resumable) or through the Beam pipelines (the bounded exact-clock form or the
unbounded windowed form, and the crawl-speed controller's Beam form)."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from frontierflow.pipelines.cli.common import (
    add_engine_args,
    add_host_policy_args,
    add_revisit_args,
    add_ui_args,
    host_policy,
    operators_page,
    revisit_policy,
    speed_settings,
    strategy_from_args,
)

if TYPE_CHECKING:
    from frontierflow.schemas.records import FetchEvent

log = logging.getLogger(__name__)


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    rp = sub.add_parser("replay", help="replay a FetchEvent log into frontier entries")
    rp.add_argument(
        "log",
        type=Path,
        help="FetchEvents: Avro container file or JSON lines; or a crawl as WARC/ARC "
        "(.warc, .warc.gz, .arc.gz: response records become FetchEvents)",
    )
    add_engine_args(rp, state_required=False)
    add_ui_args(rp)
    add_host_policy_args(rp)
    add_revisit_args(rp)
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
    rp.add_argument(
        "--echo-from-state",
        action="store_true",
        help="an event without echo (a log from another crawler) gets the one its strategy "
        "derives from the state at fetch time; always on for a WARC",
    )
    rp.add_argument(
        "--seed-url",
        action="append",
        default=[],
        metavar="URL",
        help="a starting page injected before the log (repeatable; the forager fleet and LAFC "
        "start from seeds), applied once, also when the replay resumes",
    )
    rp.add_argument(
        "--commit-every",
        type=int,
        default=None,
        metavar="STEPS",
        help="with the embedded engine: steps per committed write batch (every step still "
        "writes its entries; a crash redoes at most this many steps); default 8",
    )
    rp.add_argument("--seed-crawl-id", default="default", help="the crawl of the --seed-url pages")
    rp.add_argument(
        "--seed-time-ms",
        type=int,
        default=0,
        help="event time of the --seed-url pages (UTC ms; a fleet's first time slice starts there)",
    )
    rp.set_defaults(handler=replay)

    wp = sub.add_parser(
        "warc-to-events", help="turn a WARC/ARC file's responses into a FetchEvent Avro log"
    )
    wp.add_argument("warc", type=Path, help=".warc, .warc.gz or .arc.gz")
    wp.add_argument("out", type=Path, help="FetchEvents as an Avro container file")
    wp.add_argument(
        "--dead-letters",
        type=Path,
        default=None,
        help="records that are no FetchEvent, with the reason (default: OUT.dead-letters.jsonl)",
    )
    wp.add_argument(
        "--fetcher-id", default=None, help="the events' fetcher_id (default: the file name)"
    )
    wp.add_argument("--crawl-id", default="default", help="the events' crawl_id")
    wp.add_argument("--cycle", type=int, default=0, help="the events' crawl cycle")
    wp.set_defaults(handler=warc_to_events)


def replay(args: argparse.Namespace) -> int:
    from frontierflow.connectors.logs import is_warc_log

    # a WARC carries no echo: it is always derived from state
    args.echo_from_state = args.echo_from_state or is_warc_log(args.log)
    if args.runner == "beam":
        if args.ui_port is not None:
            raise ValueError("--ui-port: the operator's page watches the embedded engine only")
        return _replay_beam(args)
    from frontierflow.pipelines.embedded.replay import REPLAY_COMMIT_EVERY, replay_log

    if args.state_dir is None:
        raise ValueError("--state-dir is required with the embedded engine")

    strategy = strategy_from_args(args)
    with operators_page(args, "replay", strategy) as observer:
        stats = replay_log(
            args.log,
            strategy_name=args.strategy,
            state_dir=args.state_dir,
            out=args.out,
            dead_letters=args.dead_letters,
            budget=args.budget,
            step_size=args.step_size,
            seed=args.seed,
            strategy=strategy,
            speed=speed_settings(args),
            fill_echo=args.echo_from_state,
            observer=observer,
            seeds=args.seed_url,
            crawl_id=args.seed_crawl_id,
            seed_ms=args.seed_time_ms,
            commit_every=(REPLAY_COMMIT_EVERY if args.commit_every is None else args.commit_every),
            hosts=host_policy(args),
            revisit=revisit_policy(args),
        )
    log.info(
        "replayed %d events (%d revisits, %d duplicates, %d dead letters): %d entries, %d removals",
        stats.events,
        stats.revisits,
        stats.duplicates,
        stats.dead_letters,
        stats.entries,
        stats.removals,
    )
    return 0


def warc_to_events(args: argparse.Namespace) -> int:
    from frontierflow.connectors.logs import load_warc_reader, read_fetch_events, write_event_log

    load_warc_reader()  # says plainly when warcio is missing
    from frontierflow.connectors.warc import WarcOptions

    options = WarcOptions(fetcher_id=args.fetcher_id, crawl_id=args.crawl_id, cycle=args.cycle)
    dead_path = args.dead_letters or args.out.with_name(args.out.name + ".dead-letters.jsonl")
    events, dead = write_event_log(
        read_fetch_events(args.warc, warc=options), args.out, dead_path, source=str(args.warc)
    )
    log.info("wrote %d FetchEvents to %s, %d dead letters to %s", events, args.out, dead, dead_path)
    return 0


def _replay_beam(args: argparse.Namespace) -> int:
    """The frontier pipeline the clock names, then (unless `--speed-controller none`) the
    speed controller's Beam form over the same log: `OUT-speed-decisions*.jsonl` (and
    `OUT-speed-dead*.jsonl`, events the speed statistics refuse)."""
    from frontierflow.pipelines.beam.event_time import parse_clock

    speed = speed_settings(args)  # refused here, before any pipeline runs
    windows = parse_clock(args.clock)
    beam_args = list(args.beam_option)
    if windows is not None and args.echo_from_state:
        raise ValueError(
            "echoes from state (--echo-from-state, or a WARC) need the bounded Beam replay "
            "(--clock exact) or the embedded engine"
        )
    if windows is not None and args.seed_url:
        raise ValueError("--seed-url needs the bounded Beam replay (--clock exact)")
    revisit = revisit_policy(args)
    strategy = strategy_from_args(args)
    if windows is not None:
        from frontierflow.pipelines.beam.stream_replay import run_beam_stream_replay

        run_beam_stream_replay(
            str(args.log),
            strategy_name=args.strategy,
            out_prefix=str(args.out),
            budget=args.budget,
            windows=windows,
            seed=args.seed,
            beam_args=beam_args,
            strategy=strategy,
            hosts=host_policy(args),
            revisit=revisit,
        )
    else:
        from frontierflow.pipelines.beam.replay import Seeds, run_beam_replay

        run_beam_replay(
            args.log,
            strategy_name=args.strategy,
            out_prefix=str(args.out),
            budget=args.budget,
            seed=args.seed,
            beam_args=beam_args,
            fill_echo=args.echo_from_state,
            strategy=strategy,
            seeds=Seeds(tuple(args.seed_url), args.seed_crawl_id, args.seed_time_ms),
            hosts=host_policy(args),
            revisit=revisit,
        )
        log.info("wrote %s-frontier*.jsonl, -state*.jsonl, -dead-letters*.jsonl", args.out)
    if speed is not None:
        from frontierflow.pipelines.beam.speed import run_beam_speed

        prefix = f"{args.out}-speed"
        run_beam_speed(speed_events(args.log), speed, prefix, beam_args=beam_args)
        log.info("wrote %s-decisions*.jsonl, -dead*.jsonl", prefix)
    return 0


def speed_events(path: Path) -> Iterator[FetchEvent]:
    """The events of a log the embedded engine's speed windows see: those the step core's
    `checked` passes and that `counts_for_speed`."""
    from frontierflow.connectors.base import Failed
    from frontierflow.connectors.logs import read_fetch_events
    from frontierflow.pipelines.core.validate import checked
    from frontierflow.pipelines.speed.per_fetcher import counts_for_speed

    for _, item, _ in read_fetch_events(path):
        event = checked(item)
        if not isinstance(event, Failed) and counts_for_speed(event):
            yield event
