"""`frontierflow simulate foragers`: forager fleets (Palotai, Farkas & Lőrincz 2005: weblogs and
reinforcement learning) hunting new relevant stories on a recorded news site in simulated
real time; writes the table of their selection in scale-free small worlds."""

from __future__ import annotations

import argparse

from frontierflow.pipelines.cli.groups import Command


def add_arguments(fp: argparse.ArgumentParser) -> None:
    from frontierflow.pipelines.evaluation.foragers import add_arguments as fleet_arguments

    fleet_arguments(fp)


def simulate_foragers(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from frontierflow.pipelines.evaluation.foragers import run_from_args, total_simulated_ms

    total_hours = total_simulated_ms(args) / 3_600_000
    with tqdm(total=total_hours, unit="sim h", disable=None) as bar:
        code = run_from_args(args, lambda ms: bar.update(ms / 3_600_000))
    print((args.out / "summary.md").read_text())
    return code


COMMAND = Command("forager fleets on a recorded news site", add_arguments, simulate_foragers)
