"""Closed-loop crawls: exact fetch orders on small graphs worked by hand, the hot-pages
metric, the CLI's outputs, and a reduced run on the shipped LAW graph."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import numpy as np
import pytest

from frontierflow.connectors.webgraph import WebGraph
from frontierflow.pipelines.cli import main
from frontierflow.pipelines.core.strategy import CrawlClock
from frontierflow.pipelines.evaluation.simulator import (
    MemoryFrontier,
    hot_fraction_curve,
    node_url,
    rank_positions,
    simulate_crawl,
    url_node,
)
from frontierflow.pipelines.strategies import build_strategy
from frontierflow.pipelines.strategies.pagerank import PageRankOrder, RankedUrl
from frontierflow.schemas.records import FrontierEntry
from frontierflow.state.pagerank import pagerank_subgraph


def _graph(arcs: list[tuple[int, int]], n: int) -> WebGraph:
    src = np.array([a for a, _ in arcs], dtype=np.int64)
    dst = np.array([b for _, b in arcs], dtype=np.int64)
    return WebGraph.from_arcs(src, dst, n)


def _order(strategy: str, arcs: list[tuple[int, int]], n: int, stop: int | None = None) -> list:
    graph = _graph(arcs, n)
    return simulate_crawl(graph, build_strategy(strategy, budget=n), [0], stop or n).tolist()


def test_bfs_order() -> None:
    arcs = [(0, 1), (0, 2), (1, 3), (2, 3), (2, 4), (3, 5)]
    assert _order("bfs", arcs, 6) == [0, 1, 2, 3, 4, 5]


def test_bfs_is_not_dfs() -> None:
    # 0 → 1, 2; 1 → 3 (deep); breadth-first fetches 2 before 3
    assert _order("bfs", [(0, 1), (0, 2), (1, 3)], 4) == [0, 1, 2, 3]


def test_backlink_order() -> None:
    # after 0: 1, 2, 3 have one backlink each (served first-come); after 1: 3 has two,
    # 4 one → 3; then 2 (one, seen before 4) adds a second to 4 → 4.
    arcs = [(0, 1), (0, 2), (0, 3), (1, 3), (1, 4), (2, 4)]
    assert _order("backlink", arcs, 5) == [0, 1, 3, 2, 4]


def test_opic_order_and_cash() -> None:
    # 0 (cash 1) pays 1/2 to 1 and 2; 1 pays 1/2 to 3; 2 and 3 tie at 1/2 (2 seen first);
    # 2 pays 1/4 each to 3 (now 3/4) and 4 (1/4).
    arcs = [(0, 1), (0, 2), (1, 3), (2, 3), (2, 4)]
    assert _order("opic", arcs, 5) == [0, 1, 2, 3, 4]


def test_ieca_prefers_the_child_of_a_low_outdegree_parent() -> None:
    # 0 → 1, 2; 1 → 3, 4, 5, 6 (weight log 4); 2 → 7 (weight 0).
    # d1 = d2 = 0.65·0.3 + log 2; 7 gets 0.65·d2 + 0, 3..6 get 0.65·d1 + log 4: 7 first.
    arcs = [(0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (1, 6), (2, 7)]
    order = _order("ieca", arcs, 8)
    assert order[:4] == [0, 1, 2, 7]


def test_random_is_a_seeded_permutation() -> None:
    arcs = [(0, i) for i in range(1, 50)]
    one, two = _order("random", arcs, 50), _order("random", arcs, 50)
    assert one == two and sorted(one) == list(range(50)) and one[1:] != list(range(1, 50))


def test_partial_pagerank_recomputes_on_the_known_graph() -> None:
    strategy = PageRankOrder(interval=2, partial=True)
    a, b, c = (f"https://{x}.example/" for x in "abc")
    states = [
        (a, RankedUrl(1.0, 0, False, (b, c))),
        (b, RankedUrl(0.5, -1)),
        (c, RankedUrl(0.5, 0, False, (b,))),
    ]
    new, changes = strategy.recompute(states, CrawlClock(2, 9))
    expected = pagerank_subgraph(np.array([0, 0, 2]), np.array([1, 2, 1]), 3)
    assert [new[k].estimate for k in (a, b, c)] == pytest.approx(expected.tolist())
    assert all(new[k].ranked for k in (a, b, c))
    # only the page not yet crawled is re-prioritised
    assert [(c.url, c.priority) for c in changes if isinstance(c, FrontierEntry)] == [
        (b, pytest.approx(expected[1]))
    ]


def test_partial_pagerank_crawl_runs_recomputations() -> None:
    arcs = [(i, j) for i in range(20) for j in ((i * 3 + 1) % 20, (i * 7 + 2) % 20)]
    order = _order("partial-pagerank", arcs, 20)
    assert sorted(order) == list(range(20))


def test_hot_fraction_by_hand() -> None:
    ranks = np.array([0, 1, 2])  # node 0 is the hottest
    order = np.array([2, 0, 1])
    # K=1: {2}, top-1 = {0}: 0. K=2: {2, 0} ∩ {0, 1} = {0}: 1/2. K=3: 1.
    assert hot_fraction_curve(order, ranks, [1, 2, 3]) == [0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match="checkpoint"):
        hot_fraction_curve(order, ranks, [4])


def test_rank_positions_descending_ties_by_id() -> None:
    assert rank_positions(np.array([0.1, 0.5, 0.1, 0.3])).tolist() == [2, 0, 3, 1]


def test_memory_frontier_latest_entry_wins_ties_first_seen() -> None:
    f = MemoryFrontier()

    def e(url: str, p: float) -> FrontierEntry:
        return FrontierEntry(url, "h", p, "s", "c", 0, None, 0, {})

    f.write([e("a", 1.0), e("b", 1.0), e("c", 0.5)], [])
    f.write([e("c", 2.0), e("a", 1.0)], [])
    assert [f.pop().url for _ in range(3)] == ["c", "a", "b"]  # type: ignore[union-attr]
    assert f.pop() is None


def test_node_urls_round_trip() -> None:
    assert url_node(node_url(12345)) == 12345


def test_cli_simulate_small_graph(tmp_path: Path) -> None:
    edges = tmp_path / "g.tsv.gz"
    arcs = [(i, j) for i in range(40) for j in ((i + 1) % 40, (i * 5 + 3) % 40, 0)]
    with gzip.open(edges, "wt") as f:
        f.writelines(f"{a}\t{b}\n" for a, b in arcs)
    out = tmp_path / "out"
    code = main(
        [
            "simulate",
            "--graph",
            str(edges),
            "--strategies",
            "ieca,bfs,opic",
            "--stop-at",
            "0.5",
            "--out",
            str(out),
            "--no-progress",
            "--points",
            "4",
        ]
    )
    assert code == 0
    rows = list(csv.DictReader((out / "hot_pages.csv").open()))
    assert {r["strategy"] for r in rows} == {"ieca", "bfs", "opic"}
    assert [r["crawled_fraction"] for r in rows if r["strategy"] == "bfs"] == [
        "0.125000",
        "0.250000",
        "0.375000",
        "0.500000",
    ]
    assert (
        "| strategy | crawled | hot pages crawled | mean over the crawl |"
        in (out / "summary.md").read_text()
    )
    assert (out / "hot_pages.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_refuses_a_bad_seed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    edges = tmp_path / "g.tsv"
    edges.write_text("0\t1\n1\t0\n")
    argv = ["simulate", "--graph", str(edges), "--seeds", "7", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    assert "seed node 7 is not in the graph (0..1)" in caplog.text


def test_a_frontier_that_empties_early_is_reported_and_scored(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The seed (node 0) reaches only the cycle 0 → 1 → 2 → 0 of a 2,000-page graph whose
    other pages all link to 3 (3 ↔ 4). Stopping at 45% means 900 pages, checkpoints every
    10: the crawl ends after 3, before the first one. The curve then ends at 3 pages:
    PageRank puts 3 and 4 first and a cycle page third (each cycle page holds 1/n, the
    pages 5..1999 only the teleport 0.15/n), so 1 of the top 3 was crawled: 1/3."""
    n = 2000
    arcs = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 3)] + [(i, 3) for i in range(5, n)]
    edges = tmp_path / "g.tsv"
    edges.write_text("".join(f"{a}\t{b}\n" for a, b in arcs))
    out = tmp_path / "o"
    argv = ["simulate", "--graph", str(edges), "--strategies", "bfs,backlink", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    rows = [
        (r["strategy"], r["crawled_fraction"], r["hot_fraction"])
        for r in csv.DictReader((out / "hot_pages.csv").open())
    ]
    assert rows == [("bfs", "0.001500", "0.333333"), ("backlink", "0.001500", "0.333333")]
    assert "bfs: the frontier emptied after 3 of the 900 pages to crawl" in caplog.text
    assert "backlink: the frontier emptied after 3 of the 900 pages to crawl" in caplog.text
    summary = (out / "summary.md").read_text()
    assert (
        "- frontier emptied before the stop fraction: bfs after 3 pages (0.15%), "
        "backlink after 3 pages (0.15%) of the 900 to crawl" in summary
    )
    assert "| bfs | 0.1% | 33.3% | 33.3% |" in summary
    assert (out / "hot_pages.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_reduced_run_on_the_shipped_law_graph(tmp_path: Path) -> None:
    """The first 10% of the evaluation in docs/RESULTS.md: IECA finds hot pages faster than
    breadth-first early on (Golshani & ZarehBidoki 2012, Fig. 5), on the real
    uk-2007-05@100000."""
    out = tmp_path / "law"
    code = main(
        [
            "simulate",
            "--strategies",
            "ieca,bfs",
            "--stop-at",
            "0.1",
            "--out",
            str(out),
            "--no-progress",
            "--points",
            "10",
        ]
    )
    assert code == 0
    final = {
        r["strategy"]: float(r["hot_fraction"])
        for r in csv.DictReader((out / "hot_pages.csv").open())
        if r["crawled_fraction"] == "0.100000"
    }
    assert final["ieca"] > final["bfs"] + 0.05


def test_the_engine_runs_a_global_strategy_s_recomputation() -> None:
    """PageRank declares itself a GlobalStrategy: with budget 40 its interval is one page,
    so three first fetches make three recomputations, and a repeat makes none."""
    from frontierflow.connectors.base import Position
    from frontierflow.pipelines.core.strategy import GlobalStrategy
    from frontierflow.pipelines.embedded.engine import Engine
    from frontierflow.pipelines.evaluation.simulator import MemoryFrontier
    from frontierflow.schemas.records import FetchEvent
    from frontierflow.state.storage.memory import InMemoryStore

    strategy = build_strategy("pagerank", budget=40)
    assert isinstance(strategy, GlobalStrategy) and strategy.interval == 1
    engine = Engine(strategy, InMemoryStore(Engine.families_for(strategy)), MemoryFrontier())
    urls = [f"https://example.org/{i}" for i in range(3)]
    events = [
        FetchEvent(url, i, 200, "f", "example.org", outlinks=tuple(urls))
        for i, url in enumerate([*urls, urls[0]])
    ]
    engine.run_step([(Position(None, i), e, b"") for i, e in enumerate(events)])
    assert engine.stats.recomputations == 3
    assert engine.stats.duplicates == 1
