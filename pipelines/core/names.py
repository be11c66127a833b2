"""The names of the strategies the command line offers, in a module light enough for it to
read before it has loaded any strategy (`pipelines.strategies.build_strategy` builds them)."""

from __future__ import annotations

GRAPH_STRATEGIES = (
    "ieca",
    "ieca-plus",
    "bfs",
    "backlink",
    "opic",
    "pagerank",
    "partial-pagerank",
    "random",
)
"""Strategies that order a crawl by links alone (what `simulate --graph` compares)."""
FOCUSED = ("lafc", "best-first", "lafc-plus", "tres")
"""Strategies that need a topic."""
