"""Golshani & ZarehBidoki 2012's evaluation: closed-loop crawls of a web graph, scored by
hot pages found.

For each strategy the simulator crawls the graph from the same seeds until `stop_at` of its
pages are fetched; after K fetches the score is the share of the K pages with the highest
global PageRank (damping 0.85, whole graph) that were among them (Golshani & ZarehBidoki
2012, §IV).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from frontierflow.connectors.webgraph import WebGraph, pagerank
from frontierflow.pipelines.evaluation.report import (
    HotPagesCurve,
    plot_hot_pages,
    write_hot_pages_csv,
    write_summary_md,
)
from frontierflow.pipelines.evaluation.simulator import (
    CrawlProgress,
    hot_fraction_curve,
    rank_positions,
    simulate_crawl,
)
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.state.ieca import IecaParams
from frontierflow.state.ieca_plus import IecaPlusParams

log = logging.getLogger(__name__)

ProgressFactory = Callable[[str, int], Callable[[int, CrawlProgress], None]]


@dataclass(frozen=True, slots=True)
class HotPagesSetup:
    """What one evaluation run compares, and on what."""

    strategies: tuple[str, ...]
    stop_at: float = 0.45
    seeds: tuple[int, ...] = (0,)
    budget: int | None = None
    """Crawl budget the strategies scale their constants to; default: the graph size."""
    points: int = 90
    random_seed: int = 0
    graph_name: str = "graph"
    ieca_overrides: dict[str, float] = field(default_factory=dict)
    """IECA constants that differ from the paper's scaled ones (`beta`, `k`)."""
    ieca_plus_damping: float | None = None
    """IECA+'s scale of δ_t in a link's candidate; default: `IecaPlusParams`'s."""
    extra_context: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 < self.stop_at <= 1:
            raise ValueError(f"--stop-at must be in (0, 1], got {self.stop_at}")
        if not self.seeds:
            raise ValueError("at least one seed page is needed")
        if self.points < 1:
            raise ValueError("points must be >= 1")


def default_seeds(graph: WebGraph, count: int = 1) -> tuple[int, ...]:
    """Node 0 (the root of a breadth-first sample, such as LAW's `@100000` graphs), then
    the next nodes with outlinks, up to `count`."""
    out = [0]
    degrees = graph.outdegrees()
    for node in range(1, graph.num_nodes):
        if len(out) >= count:
            break
        if degrees[node] > 0:
            out.append(node)
    return tuple(out[:count])


def random_seeds(graph: WebGraph, count: int, seed: int = 0) -> tuple[int, ...]:
    """`count` distinct nodes with outlinks, drawn uniformly with a seeded generator."""
    candidates = np.flatnonzero(graph.outdegrees() > 0)
    if not 0 < count <= len(candidates):
        raise ValueError(f"cannot draw {count} seeds from {len(candidates)} nodes with links")
    rng = np.random.default_rng(seed)
    return tuple(sorted(int(x) for x in rng.choice(candidates, count, replace=False)))


def run_hot_pages(
    graph: WebGraph,
    setup: HotPagesSetup,
    out_dir: Path,
    progress: ProgressFactory | None = None,
) -> list[HotPagesCurve]:
    """Crawl with every strategy; write hot_pages.csv, summary.md and hot_pages.png."""
    for s in setup.seeds:
        if not 0 <= s < graph.num_nodes:
            raise ValueError(f"seed node {s} is not in the graph (0..{graph.num_nodes - 1})")
    out_dir.mkdir(parents=True, exist_ok=True)
    n = graph.num_nodes
    stop_count = max(1, round(setup.stop_at * n))
    budget = setup.budget or n
    global_rank = rank_positions(pagerank(graph))
    ieca = IecaParams.for_budget(budget, **setup.ieca_overrides)
    checkpoints = _checkpoints(stop_count, setup.points)
    curves: list[HotPagesCurve] = []
    timings: dict[str, str] = {}
    ran_dry: dict[str, int] = {}
    for name in setup.strategies:
        strategy = build_strategy(
            name,
            budget=budget,
            crawl_id="sim",
            seed=setup.random_seed,
            ieca=ieca,
            ieca_plus_damping=setup.ieca_plus_damping,
        )
        started, cpu_started = time.perf_counter(), time.process_time()
        on_fetch = progress(name, stop_count) if progress is not None else None
        order = simulate_crawl(
            graph, strategy, setup.seeds, stop_count, crawl_id="sim", on_fetch=on_fetch
        )
        timings[name] = (
            f"{time.perf_counter() - started:.1f} s (CPU {time.process_time() - cpu_started:.1f} s)"
        )
        fetched = len(order)
        reached = _reached(checkpoints, fetched)
        if fetched < stop_count:
            ran_dry[name] = fetched
            log.warning(
                "%s: the frontier emptied after %d of the %d pages to crawl (%.2f%% of the "
                "graph, stop at %.1f%%): the seeds reach no more; scored up to there",
                name,
                fetched,
                stop_count,
                100 * fetched / n,
                100 * setup.stop_at,
            )
        hot = hot_fraction_curve(order, global_rank, reached)
        curves.append(HotPagesCurve(name, tuple(k / n for k in reached), tuple(hot)))
        log.info(
            "%s: %.1f%% hot pages at %.1f%% crawled", name, 100 * hot[-1], 100 * reached[-1] / n
        )
    context = {
        "graph": f"{setup.graph_name} ({n:,} pages, {graph.num_arcs:,} links)",
        "seeds": ", ".join(map(str, setup.seeds[:10])) + (" …" if len(setup.seeds) > 10 else ""),
        "crawl budget for the strategies' constants": f"{budget:,} pages (k = {budget // 40:,})",
        "IECA constants": f"k = {ieca.k:,}, β = {ieca.beta}, δ_t from "
        f"{ieca.delta_start} to {ieca.delta_start - ieca.delta_slope:.2f}, seeds at "
        f"{ieca.seed_distance}",
        "hot pages": "top-K by global PageRank (damping 0.85), K = pages crawled",
        "run time per strategy (wall, and CPU of this process: the fairer figure on a "
        "shared machine)": ", ".join(f"{k} {v}" for k, v in timings.items()),
        **setup.extra_context,
    }
    if "ieca-plus" in setup.strategies:
        scale = setup.ieca_plus_damping
        context["IECA+ constants"] = (
            f"δ_t as IECA's, scaled by {IecaPlusParams().damping_scale if scale is None else scale}"
            " in a link's candidate"
        )
    if ran_dry:
        context["frontier emptied before the stop fraction"] = (
            ", ".join(f"{k} after {v:,} pages ({v / n:.2%})" for k, v in ran_dry.items())
            + f" of the {stop_count:,} to crawl; the seeds reach no more pages, so these "
            "rows end where the crawl stopped"
        )
    write_hot_pages_csv(out_dir / "hot_pages.csv", curves)
    write_summary_md(out_dir / "summary.md", curves, setup.stop_at, context)
    plot_hot_pages(out_dir / "hot_pages.png", curves, f"Hot pages on {setup.graph_name}")
    return curves


def _reached(checkpoints: Sequence[int], fetched: int) -> list[int]:
    """The checkpoints a crawl of `fetched` pages reached, ending with `fetched` itself when
    it stopped short of the last one (its frontier emptied), so the curve ends where the
    crawl did."""
    reached = [k for k in checkpoints if k <= fetched]
    if fetched > 0 and (not reached or reached[-1] < fetched) and fetched < checkpoints[-1]:
        reached.append(fetched)
    return reached


def _checkpoints(stop_count: int, points: int) -> Sequence[int]:
    ks = np.unique(np.linspace(0, stop_count, points + 1).round().astype(np.int64)[1:])
    return [int(k) for k in ks if k > 0]
