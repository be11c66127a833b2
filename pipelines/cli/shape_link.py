"""`frontierflow shape-link`: a network namespace whose link follows a bandwidth trace
(`frontierflow.pipelines.evaluation.shaping`), for a real crawl of a server run inside it.

It makes the namespace and the veth pair, writes the namespace's address to `--ready`
(the sign that servers may start inside), replays one pass (at once, or when SIGUSR1 comes
with `--start-on-sigusr1`) of the trace (scaled by
`--rate-scale`, compressed by `--speedup`) writing each rate applied to `--log`, then holds
the last rate until SIGTERM or SIGINT, and removes the namespace. Stop the servers inside
it first."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    sp = sub.add_parser("shape-link", help="a namespace whose link follows a bandwidth trace")
    sp.add_argument("--trace", type=Path, required=True, help="a time_s<TAB>Mbps trace file")
    sp.add_argument("--netns", default="ffshape", help="name of the namespace to create")
    sp.add_argument("--rate-scale", type=float, default=1.0, help="multiply every rate")
    sp.add_argument(
        "--speedup", type=float, default=1.0, help="compress time: a sample at t s comes at t/K s"
    )
    sp.add_argument("--host-address", default="10.213.0.1", help="this side of the pair")
    sp.add_argument("--ns-address", default="10.213.0.2", help="the namespace's side")
    sp.add_argument("--log", type=Path, required=True, help="where each rate applied is written")
    sp.add_argument("--ready", type=Path, required=True, help="written with the address once up")
    sp.add_argument(
        "--start-on-sigusr1",
        action="store_true",
        help="hold the first rate until SIGUSR1 (the crawl's first request), then replay",
    )
    sp.set_defaults(handler=shape_link)


def shape_link(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.evaluation.shaping import (
        ShapedLink,
        ShapeSample,
        replay_trace,
        write_sample,
    )
    from frontierflow.pipelines.evaluation.speedsim import read_trace

    trace = read_trace(args.trace).scaled(args.rate_scale, args.speedup)
    stop, go = threading.Event(), threading.Event()

    def on_stop(*_: object) -> None:
        stop.set()
        go.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_stop)
    signal.signal(signal.SIGUSR1, lambda *_: go.set())
    link = ShapedLink.create(
        args.netns, args.host_address, args.ns_address, mbps=float(trace.mbps[0])
    )
    try:
        with args.log.open("w") as out:
            out.write(f"# trace {args.trace} rate-scale {args.rate_scale:g} speedup "
                      f"{args.speedup:g}\n# kind\tat\ttrace_s\tmbps\tsent_bytes\n")  # fmt: skip

            def record(kind: str, sample: ShapeSample) -> None:
                write_sample(out, kind, sample)

            tmp = args.ready.with_suffix(".tmp")
            tmp.write_text(f"{link.ns_address}\n")
            tmp.replace(args.ready)
            log.info("namespace %s up at %s; replaying %s (%d samples, %.1f s)", link.netns,
                     link.ns_address, trace.name, len(trace.times), trace.period)  # fmt: skip
            if args.start_on_sigusr1:
                go.wait()
            if not stop.is_set() and replay_trace(link, trace, stop, record):
                log.info("trace over; holding the last rate until stopped")
                stop.wait()
    finally:
        link.close()
    return 0
