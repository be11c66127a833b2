"""`frontierflow simulate revisits`: revisit policies on a recorded news site at equal
downloads — a fixed schedule (and the same without the home page), revisits in proportion to
the change rate (Cho & Garcia-Molina 2003, TOIT, estimates it), Cho & Garcia-Molina 2003
(TODS)'s optimal-freshness allocation and our discovery rule, and on request the weblog forager
fleet with and without the discovery rule's schedule; with `--tune`, the grid that chooses
the learned policies' constants on windows before 2023-06-01."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from frontierflow.pipelines.cli.common import csv_list
from frontierflow.pipelines.cli.groups import Command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from frontierflow.pipelines.evaluation.forager_fleet import WORLD_NEWS
    from frontierflow.pipelines.evaluation.revisit_constants import CONSTANT_NAMES
    from frontierflow.pipelines.evaluation.revisit_policy import REVISIT_POLICIES, Policy

    parser.add_argument("--news", type=Path, default=Path("../shared/data/news"))
    parser.add_argument(
        "--window",
        choices=("report", "tuning"),
        default="report",
        help="the windows: tuning (before 2023-06-01) or report (after; the default)",
    )
    parser.add_argument("--starts", type=csv_list, default=None, help="ISO 8601 UTC window starts")
    parser.add_argument("--days", type=float, default=8.0, help="days in each window")
    parser.add_argument(
        "--warmup-days", type=float, default=2.0, help="crawled before, not counted"
    )
    parser.add_argument(
        "--download-ms", type=csv_list, default=("10000",), help="one download every N ms; a list"
    )
    parser.add_argument(
        "--policies",
        type=csv_list,
        default=tuple(p.value for p in REVISIT_POLICIES),
        help=f"comma-separated, of: {', '.join(p.value for p in Policy)} (default: all but "
        "the live job's rule and the two fleets)",
    )
    parser.add_argument(
        "--topic", type=csv_list, default=WORLD_NEWS, help="sections, comma-separated"
    )
    parser.add_argument(
        "--seeds",
        type=csv_list,
        default=None,
        help="where the learned policies start, one run each (default: the home page)",
    )
    parser.add_argument(
        "--constants",
        action="append",
        default=[],
        metavar="[POLICY:]NAME=VALUE,…",
        help=f"the learned policies' constants ({', '.join(CONSTANT_NAMES)}) over those "
        "tuned at each download rate; repeatable",
    )
    parser.add_argument(
        "--tune",
        default=None,
        metavar="NAME=V1:V2,…",
        help="run every combination for each learned policy (tuning windows only)",
    )
    parser.add_argument("--workers", type=int, default=2, help="processes (one window each)")
    parser.add_argument("--out", type=Path, required=True, help="output directory")


def _pairs(text: str) -> dict[str, str]:
    out = {}
    for item in csv_list(text):
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"expected NAME=VALUE, got {item!r}")
        out[name.strip()] = value.strip()
    return out


def evaluation_of(args: argparse.Namespace) -> Any:
    """The `RevisitEvaluation` the options describe (ValueError when they do not make one)."""
    from frontierflow.pipelines.evaluation.news_site import HOME
    from frontierflow.pipelines.evaluation.revisit_eval import WINDOWS, RevisitEvaluation
    from frontierflow.pipelines.evaluation.revisit_policy import Policy

    policies = tuple(Policy(p) for p in args.policies)
    constants: dict[Policy, dict[str, str]] = {}
    for text in args.constants:
        head, sep, rest = text.partition(":")
        if sep and "=" not in head:
            targets, text = [Policy(head.strip())], rest
        else:
            targets = [p for p in Policy if p.learns]
        for policy in targets:
            constants.setdefault(policy, {}).update(_pairs(text))
    grid: tuple[tuple[str, tuple[str, ...]], ...] = ()
    if args.tune is not None:
        grid = tuple((name, tuple(v.split(":"))) for name, v in _pairs(args.tune).items())
    window = "tuning" if grid and args.starts is None else args.window
    return RevisitEvaluation(
        news=args.news,
        out=args.out,
        starts=tuple(args.starts) if args.starts else WINDOWS[window],
        days=args.days,
        warmup_days=args.warmup_days,
        download_ms=tuple(int(v) for v in args.download_ms),
        policies=policies,
        topic=tuple(args.topic),
        constants=constants,
        seeds=tuple(args.seeds) if args.seeds else (HOME,),
        grid=grid,
        workers=args.workers,
    )


def simulate_revisits(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from frontierflow.pipelines.evaluation.revisit_eval import evaluate
    from frontierflow.pipelines.evaluation.revisit_report import write_reports

    evaluation = evaluation_of(args)
    with tqdm(total=evaluation.runs(), unit="run", disable=None) as bar:
        results = evaluate(evaluation, bar.update)
    write_reports(evaluation.out, evaluation, results)
    name = "tuning.md" if evaluation.grid else "summary.md"
    print((evaluation.out / name).read_text())
    return 0


COMMAND = Command(
    "revisit policies on a recorded news site, at equal downloads",
    add_arguments,
    simulate_revisits,
)
