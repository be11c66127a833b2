"""`frontierflow simulate-foragers`: forager fleets (seeds 002/004) hunting new relevant
stories on a recorded news site in simulated real time; writes seed 004's table."""

from __future__ import annotations

import argparse
from typing import Any


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    from frontierflow.pipelines.evaluation.foragers import add_arguments

    fp = sub.add_parser("simulate-foragers", help="forager fleets (seeds 002/004), news site")
    add_arguments(fp)
    fp.set_defaults(handler=simulate_foragers)


def simulate_foragers(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from frontierflow.pipelines.evaluation.foragers import run_from_args, total_simulated_ms

    total_hours = total_simulated_ms(args) / 3_600_000
    with tqdm(total=total_hours, unit="sim h", disable=None) as bar:
        code = run_from_args(args, lambda ms: bar.update(ms / 3_600_000))
    print((args.out / "summary.md").read_text())
    return code
