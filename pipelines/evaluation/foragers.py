"""The evaluation of Palotai, Farkas & Lőrincz 2005 (CEEMAS): every forager
variant on the news site and its rewired copy.

`evaluate` runs each variant's fleet (`forager_fleet`) a number of times on both sites, plus
the fixed-schedule baseline, and `run_evaluation` writes the reports (`forager_report`) for
`frontierflow simulate foragers`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from frontierflow.pipelines.evaluation.forager_fleet import (
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


# --- one evaluation ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ForagerEvaluation:
    """What `frontierflow simulate foragers` runs, its options parsed once."""

    setup: ForagerSetup
    variants: tuple[str, ...]
    runs: int
    out: Path
    rewired: bool = True
    baseline: bool = True

    def __post_init__(self) -> None:
        for v in self.variants:
            Variant(v)  # ValueError for an unknown variant, before any work
        if self.runs < 1:
            raise ValueError(f"runs must be >= 1, got {self.runs}")

    def simulated_ms(self) -> int:
        """Simulated time the evaluation will cover (for a progress bar)."""
        sites = 2 if self.rewired else 1
        runs = len(self.variants) * self.runs + (1 if self.baseline else 0)
        return int(sites * runs * self.setup.days * DAY_MS)


def run_evaluation(evaluation: ForagerEvaluation, progress: Progress | None = None) -> None:
    """Runs the evaluation and writes runs.csv, efficiency.csv, summary.md and
    efficiency.png to its `out` folder."""
    e = evaluation
    results, graphs = evaluate(e.setup, list(e.variants), e.runs, e.rewired, e.baseline, progress)
    write_reports(e.out, e.setup, results, graphs)
