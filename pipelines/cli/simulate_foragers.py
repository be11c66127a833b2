"""`frontierflow simulate foragers`: forager fleets (Palotai, Farkas & Lőrincz 2005: weblogs and
reinforcement learning) hunting new relevant stories on a recorded news site in simulated
real time; writes the table of their selection in scale-free small worlds."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from frontierflow.pipelines.cli.groups import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from frontierflow.pipelines.evaluation.forager_fleet import (
        DEFAULT_DOWNLOAD_MS,
        DEFAULT_START,
        WORLD_NEWS,
    )

    parser.add_argument("--news", type=Path, default=Path("../shared/data/news"))
    parser.add_argument("--variants", default="wl,rl,wlrl", help="wl, rl, wlrl")
    parser.add_argument("--days", type=float, default=8.0)
    parser.add_argument("--start", default=DEFAULT_START, help="ISO 8601 UTC start")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--download-ms", type=int, default=DEFAULT_DOWNLOAD_MS)
    parser.add_argument("--topic", default=",".join(WORLD_NEWS), help="sections, comma-separated")
    parser.add_argument("--no-rewired", action="store_true", help="skip the rewired site")
    parser.add_argument("--no-baseline", action="store_true", help="skip the fixed schedule")
    parser.add_argument("--out", type=Path, required=True, help="output directory")


def evaluation_of(args: argparse.Namespace) -> Any:
    """The `ForagerEvaluation` the options describe (ValueError when they do not make one)."""
    from frontierflow.pipelines.evaluation.forager_fleet import ForagerSetup
    from frontierflow.pipelines.evaluation.foragers import ForagerEvaluation

    def items(text: str) -> tuple[str, ...]:
        return tuple(t.strip() for t in text.split(",") if t.strip())

    setup = ForagerSetup(
        news=args.news,
        start=args.start,
        days=args.days,
        topic=items(args.topic),
        download_ms=args.download_ms,
    )
    return ForagerEvaluation(
        setup,
        items(args.variants),
        args.runs,
        args.out,
        rewired=not args.no_rewired,
        baseline=not args.no_baseline,
    )


def simulate_foragers(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from frontierflow.pipelines.evaluation.foragers import run_evaluation

    evaluation = evaluation_of(args)
    with tqdm(total=evaluation.simulated_ms() / 3_600_000, unit="sim h", disable=None) as bar:
        run_evaluation(evaluation, lambda ms: bar.update(ms / 3_600_000))
    print((evaluation.out / "summary.md").read_text())
    return 0


COMMAND = Command("forager fleets on a recorded news site", add_arguments, simulate_foragers)
