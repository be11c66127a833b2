"""`frontierflow simulate manuals`: focused crawls (Akbari Torkestani 2012) of the development
set's Debian manuals, each a web of its own, on the topics of one half of the fixed
development/report split (`frontierflow.pipelines.evaluation.manuals`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from frontierflow.pipelines.cli.common import (
    add_lafc_args,
    csv_list,
    lafc_plus_settings,
    lafc_settings,
    tres_params,
)
from frontierflow.pipelines.cli.groups import Command

STRATEGIES = ("lafc", "lafc-plus", "tres", "best-first", "bfs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--half",
        choices=("development", "report"),
        required=True,
        help="which topics: development (constants may be chosen on them) or report",
    )
    parser.add_argument("--manual", action="append", default=[], help="a subset (repeatable)")
    parser.add_argument("--strategies", type=csv_list, default=STRATEGIES)
    parser.add_argument("--cycles", type=int, default=3, help="crawl cycles")
    parser.add_argument("--runs", type=int, default=5, help="runs of the randomised strategies")
    parser.add_argument("--points", type=int, default=10, help="checkpoints per cycle")
    parser.add_argument(
        "--budget-scale",
        type=float,
        default=1.0,
        help="each manual's budget per cycle times this, in (0, 1] (a smaller check)",
    )
    add_lafc_args(parser)
    parser.set_defaults(lafc_c=0.6)  # the main evaluation's calibration (docs/RESULTS.md)
    parser.add_argument("--out", type=Path, required=True, help="output directory")


def simulate_manuals(args: argparse.Namespace) -> int:
    from frontierflow.pipelines.evaluation.focused import FocusedSetup
    from frontierflow.pipelines.evaluation.manuals import (
        CALIBRATED_JUDGE,
        MANUALS,
        manual,
        run_manuals,
        write_margins,
    )

    manuals = [manual(name) for name in args.manual] if args.manual else list(MANUALS)
    setup = FocusedSetup(
        strategies=tuple(args.strategies),
        cycles=args.cycles,
        points=args.points,
        runs=args.runs,
        judge=CALIBRATED_JUDGE,
        lafc=lafc_settings(args, 0),
        lafc_plus=lafc_plus_settings(args),
        tres=tres_params(args),
    )
    results = run_manuals(
        args.half, setup, args.out, manuals=manuals, budget_scale=args.budget_scale
    )
    for path in write_margins(args.out, results, setup):
        print(path.read_text())
    return 0


COMMAND = Command(
    "focused crawls of the development set's Debian manuals, one half of its topics",
    add_arguments,
    simulate_manuals,
)
