"""The evaluation of Palotai, Farkas & Lőrincz 2005 (CEEMAS): every forager
variant on the news site and its rewired copy.

`evaluate` runs each variant's fleet (`forager_fleet`) a number of times on both sites, plus
the fixed-schedule baseline, and `run_from_args` writes the reports (`forager_report`) for
`frontierflow simulate foragers`.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from frontierflow.pipelines.evaluation.forager_fleet import (
    DEFAULT_DOWNLOAD_MS,
    DEFAULT_START,
    WORLD_NEWS,
    ForagerSetup,
    Progress,
    build_site,
    run_baseline,
    run_fleet,
)
from frontierflow.pipelines.evaluation.forager_report import RunResult, summarise, write_reports
from frontierflow.pipelines.evaluation.news_graph import GraphMeasures, measure, site_graph
from frontierflow.pipelines.evaluation.news_site import DAY_MS
from frontierflow.state.forager import Variant

log = logging.getLogger(__name__)


def evaluate(
    setup: ForagerSetup,
    variants: Sequence[str],
    runs: int,
    rewired: bool = True,
    baseline: bool = True,
    progress: Progress | None = None,
) -> tuple[list[RunResult], dict[str, GraphMeasures]]:
    """Every variant `runs` times on the site (and on its rewired copy), plus the baseline."""
    results: list[RunResult] = []
    graphs: dict[str, GraphMeasures] = {}
    sites = [("sfsw", False), ("rewired", True)] if rewired else [("sfsw", False)]
    for site_name, rewire in sites:
        site = build_site(setup, rewire)
        graphs[site_name] = measure(site_graph(site, site.end_ms))
        for name in variants:
            variant = Variant(name)
            for run in range(runs):
                m = run_fleet(site, setup, variant, seed=run, progress=progress)
                results.append(summarise(site, setup, site_name, variant.value, run, m))
                r = results[-1]
                log.info(
                    "%s %s run %d: %d relevant of %d sent, %d downloaded",
                    site_name, name, run, r.relevant, r.sent, r.downloaded,
                )  # fmt: skip
        if baseline:
            m = run_baseline(site, setup, progress)
            results.append(summarise(site, setup, site_name, "baseline", 0, m))
    return results, graphs


# --- command line ------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `frontierflow simulate foragers`."""
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


def run_from_args(args: argparse.Namespace, progress: Progress | None = None) -> int:
    """Runs the evaluation the options describe and writes runs.csv, efficiency.csv,
    summary.md and efficiency.png to `--out`."""
    setup = ForagerSetup(
        news=args.news,
        start=args.start,
        days=args.days,
        topic=tuple(t.strip() for t in args.topic.split(",") if t.strip()),
        download_ms=args.download_ms,
    )
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        Variant(v)  # ValueError for an unknown variant, before any work
    results, graphs = evaluate(
        setup, variants, args.runs, not args.no_rewired, not args.no_baseline, progress
    )
    write_reports(args.out, setup, results, graphs)
    return 0


def total_simulated_ms(args: argparse.Namespace) -> int:
    """Simulated time the evaluation will cover (for a progress bar)."""
    variants = len([v for v in args.variants.split(",") if v.strip()])
    sites = 1 if args.no_rewired else 2
    runs = variants * args.runs + (0 if args.no_baseline else 1)
    return int(sites * runs * args.days * DAY_MS)
