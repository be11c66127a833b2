"""`frontierflow simulate-speed`: the thread-scaling controllers (seed 003) on measured
bandwidth traces, each controller in a simulated fetcher; writes runs, a summary and plots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from frontierflow.pipelines.cli.common import csv_list


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    sv = sub.add_parser(
        "simulate-speed", help="thread-scaling controllers (seed 003) on bandwidth traces"
    )
    sv.add_argument(
        "--trace",
        type=Path,
        default=Path("../shared/data/bandwidth"),
        help="a time_s<TAB>Mbps trace file, or a folder of them (searched recursively)",
    )
    sv.add_argument(
        "--controllers",
        type=csv_list,
        default=("seed003", "seed003-literal", "aimd", "autothrottle", "fixed-4", "fixed-16"),
        help="seed003, seed003-literal, aimd, autothrottle, fixed-N",
    )
    sv.add_argument("--out", type=Path, required=True, help="output directory")
    sv.add_argument("--max-traces", type=int, default=None, help="only the first N traces")
    sv.add_argument("--duration", type=float, default=None, help="seconds (default: one pass)")
    sv.add_argument("--window-ms", type=int, default=None, help="statistics window length")
    sv.add_argument("--seed", type=int, default=0, help="seed of the simulated world")
    sv.add_argument("--workers", type=int, default=2, help="processes")
    sv.add_argument("--plots", type=int, default=-1, help="traces to plot (-1: all)")
    sv.set_defaults(handler=simulate_speed)


def simulate_speed(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.evaluation.speed import SpeedEvalSetup, run_speed_eval
    from frontierflow.pipelines.evaluation.speedsim import find_traces

    traces = find_traces(args.trace)
    if args.max_traces is not None:
        traces = traces[: args.max_traces]
    if not traces:
        raise ValueError(f"no traces under {args.trace}")
    overrides = () if args.window_ms is None else (("window_ms", args.window_ms),)
    setup = SpeedEvalSetup(
        traces=tuple(traces),
        controllers=args.controllers,
        duration_s=args.duration,
        seed=args.seed,
        workers=args.workers,
        plots=args.plots,
        overrides=overrides,
    )
    run_speed_eval(setup, args.out)
    print((args.out / "summary.md").read_text())
    print(f"wrote {args.out / 'runs.csv'}, summary.csv, summary.md, plots/")
    return 0
