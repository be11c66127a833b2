"""Which strategies the Beam forms run: every per-key strategy; a global one (PageRank's
recomputation over every key's state) has no per-key form and is refused at start-up."""

from __future__ import annotations

from typing import Any

from frontierflow.pipelines.core.strategy import GlobalStrategy, Strategy
from frontierflow.pipelines.strategies import build_strategy


def beam_strategy(
    strategy_name: str, *, budget: int, seed: int = 0, strategy: Strategy[Any] | None = None
) -> Strategy[Any]:
    """The strategy (by name unless given), refused at start-up when Beam cannot run it
    exactly: a global recomputation over every key's state has no per-key form."""
    if strategy is None:
        if strategy_name in ("pagerank", "partial-pagerank"):
            raise ValueError(
                f"{strategy_name} needs a global recomputation: use the embedded engine"
            )
        strategy = build_strategy(strategy_name, budget=budget, seed=seed)
    if isinstance(strategy, GlobalStrategy):
        raise ValueError(f"{strategy.name} needs a global recomputation: use the embedded engine")
    return strategy
