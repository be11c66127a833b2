"""Crawl strategies by name: IECA, LAFC, the TRES-style learner and the baselines they are
measured against."""

from __future__ import annotations

from typing import Any

from frontierflow.pipelines.core.names import FOCUSED, GRAPH_STRATEGIES
from frontierflow.pipelines.core.strategy import Strategy
from frontierflow.pipelines.strategies.baselines import (
    BacklinkCount,
    BestFirst,
    BreadthFirst,
    Opic,
    RandomOrder,
)
from frontierflow.pipelines.strategies.foragers import (
    FORAGER_VARIANTS,
    ForagerFleet,
    ForagerTopic,
)
from frontierflow.pipelines.strategies.ieca import IecaStrategy
from frontierflow.pipelines.strategies.ieca_plus import IecaPlusStrategy
from frontierflow.pipelines.strategies.lafc import Lafc, LafcSettings
from frontierflow.pipelines.strategies.lafc_plus import LafcPlus, LafcPlusSettings
from frontierflow.pipelines.strategies.pagerank import PageRankOrder
from frontierflow.pipelines.strategies.tres import Tres, TresSettings
from frontierflow.state.fleet import FleetParams
from frontierflow.state.forager_agent import AgentParams
from frontierflow.state.foraging import ForagerParams
from frontierflow.state.ieca import IecaParams
from frontierflow.state.ieca_plus import IecaPlusParams
from frontierflow.state.relevance import Topic

STRATEGY_NAMES = (*GRAPH_STRATEGIES, *FOCUSED, *FORAGER_VARIANTS)


def build_strategy(
    name: str,
    *,
    budget: int,
    crawl_id: str = "default",
    seed: int = 0,
    ieca: IecaParams | None = None,
    ieca_plus_damping: float | None = None,
    topic: Topic | None = None,
    lafc: LafcSettings | None = None,
    lafc_plus: LafcPlusSettings | None = None,
    tres: TresSettings | None = None,
    sections: tuple[str, ...] = (),
    fleet: tuple[ForagerParams, AgentParams] | None = None,
) -> Strategy[Any]:
    """A strategy by its CLI name, its constants scaled to a crawl of `budget` pages.

    The paper's k = 250,000 on 10M pages (1/40 of the crawl) is the interval of IECA's δ_t
    and α updates and of the PageRank recomputations alike.
    """
    interval = max(1, budget // 40)
    if name == "ieca":
        return IecaStrategy(ieca if ieca is not None else IecaParams.for_budget(budget))
    if name == "ieca-plus":
        # IECA's δ_t schedule and seed distance (with any --ieca-k given); β is not used
        clock = ieca if ieca is not None else IecaParams.for_budget(budget)
        if ieca_plus_damping is None:
            return IecaPlusStrategy(IecaPlusParams(clock))
        return IecaPlusStrategy(IecaPlusParams(clock, damping_scale=ieca_plus_damping))
    if name == "bfs":
        return BreadthFirst()
    if name == "backlink":
        return BacklinkCount()
    if name == "opic":
        return Opic()
    if name == "random":
        return RandomOrder(seed)
    if name in FORAGER_VARIANTS:
        if topic is None and not sections:
            raise ValueError(f"strategy {name!r} needs a topic (--topic or --sections)")
        rule = ForagerTopic(frozenset(sections), topic)
        forager, agent = fleet if fleet is not None else (ForagerParams(), AgentParams())
        return ForagerFleet(FleetParams(FORAGER_VARIANTS[name], seed, forager, agent), rule)
    if name in FOCUSED:
        if topic is None:
            raise ValueError(f"strategy {name!r} needs a topic (--topic)")
        if name == "lafc":
            return Lafc(topic, lafc if lafc is not None else LafcSettings(seed=seed))
        if name == "lafc-plus":
            return LafcPlus(topic, lafc_plus)
        if name == "tres":
            return Tres(topic, tres)
        return BestFirst(topic)
    if name in ("pagerank", "partial-pagerank"):
        return PageRankOrder(interval, partial=name == "partial-pagerank", crawl_id=crawl_id)
    raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGY_NAMES)}")
