"""IECA+ in the closed-loop simulator and through `frontierflow simulate`."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np

from frontierflow.connectors.webgraph import WebGraph
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.evaluation.simulator import simulate_crawl
from frontierflow.pipelines.strategies.ieca_plus import IecaPlusStrategy
from frontierflow.state.ieca import IecaParams
from frontierflow.state.ieca_plus import IecaPlusParams


def test_a_page_with_two_parents_jumps_its_siblings() -> None:
    """0 → 1, 2; 1 → 3, 4, 5; 2 → 5, 6, 7. δ = 0.35 throughout (k far beyond the crawl).

    d1 = d2 = 0.65·0.3 + log10 2 = 0.49603. Each of 1's and 2's links: candidate
    0.65·0.49603 + log10 3 = 0.79954. 5 gets two: 0.79954 − log10 2 = 0.49851 and is
    fetched before 3, 4, 6, 7 (0.79954 each, served first-come).
    """
    arcs = [(0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (2, 5), (2, 6), (2, 7)]
    graph = WebGraph.from_arcs(
        np.array([a for a, _ in arcs], dtype=np.int64),
        np.array([b for _, b in arcs], dtype=np.int64),
        8,
    )
    strategy = IecaPlusStrategy(
        IecaPlusParams(IecaParams(budget=10_000, k=10_000), damping_scale=1.0)
    )
    assert simulate_crawl(graph, strategy, [0], 8).tolist() == [0, 1, 2, 5, 3, 4, 6, 7]


def test_cli_simulate_with_ieca_plus(tmp_path: Path) -> None:
    edges = tmp_path / "g.tsv.gz"
    arcs = [(i, j) for i in range(40) for j in ((i + 1) % 40, (i * 5 + 3) % 40, 0)]
    with gzip.open(edges, "wt") as f:
        f.writelines(f"{a}\t{b}\n" for a, b in arcs)
    out = tmp_path / "out"
    argv = ["simulate", "--graph", str(edges), "--strategies", "ieca-plus,ieca", "--stop-at"]
    argv += ["0.5", "--out", str(out), "--no-progress", "--points", "4"]
    assert main([*argv, "--ieca-plus-damping", "0.5"]) == 0
    rows = list(csv.DictReader((out / "hot_pages.csv").open()))
    assert {r["strategy"] for r in rows} == {"ieca-plus", "ieca"}
    summary = (out / "summary.md").read_text()
    assert "IECA+ constants: δ_t as IECA's, scaled by 0.5" in summary
    assert "| ieca-plus | 50.0% |" in summary
