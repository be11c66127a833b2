"""`frontierflow simulate speed`: the thread-scaling controllers (Nandy, Sarkar & Das 2012's
statistical-hypothesis controller and the baselines) on measured bandwidth traces, each
controller in a simulated fetcher; writes runs, a summary and plots."""

from __future__ import annotations

import argparse
from pathlib import Path

from frontierflow.pipelines.cli.common import csv_list
from frontierflow.pipelines.cli.groups import Command


def add_arguments(sv: argparse.ArgumentParser) -> None:
    sv.add_argument(
        "--trace",
        type=Path,
        default=Path("../shared/data/bandwidth"),
        help="a time_s<TAB>Mbps trace file, or a folder of them (searched recursively)",
    )
    sv.add_argument(
        "--controllers",
        type=csv_list,
        default=None,
        help="hypothesis (Nandy, Sarkar & Das 2012's statistical-hypothesis controller), "
        "hypothesis-literal (its eq. 8 as printed), aimd, autothrottle, fixed-N; "
        "default: hypothesis,hypothesis-literal,aimd,autothrottle,fixed-4,fixed-16",
    )
    sv.add_argument("--out", type=Path, required=True, help="output directory")
    sv.add_argument("--max-traces", type=int, default=None, help="only the first N traces")
    sv.add_argument("--duration", type=float, default=None, help="seconds (default: one pass)")
    sv.add_argument("--window-ms", type=int, default=None, help="statistics window length")
    sv.add_argument("--seed", type=int, default=0, help="seed of the simulated world")
    sv.add_argument("--workers", type=int, default=2, help="processes")
    sv.add_argument("--plots", type=int, default=-1, help="traces to plot (-1: all)")


def simulate_speed(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.evaluation.speed import (
        DEFAULT_CONTROLLERS,
        SpeedEvalSetup,
        run_speed_eval,
    )
    from frontierflow.pipelines.evaluation.speedsim import find_traces

    traces = find_traces(args.trace)
    if args.max_traces is not None:
        traces = traces[: args.max_traces]
    if not traces:
        raise ValueError(f"no traces under {args.trace}")
    overrides = () if args.window_ms is None else (("window_ms", args.window_ms),)
    setup = SpeedEvalSetup(
        traces=tuple(traces),
        controllers=tuple(args.controllers or DEFAULT_CONTROLLERS),
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


COMMAND = Command("thread-scaling controllers on bandwidth traces", add_arguments, simulate_speed)
