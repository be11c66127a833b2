"""`frontierflow simulate [speed|foragers|revisits|manuals]`: closed-loop crawls over a web
graph (hot pages found, Golshani & ZarehBidoki 2012's comparison) or over a topical web of HTML
pages (focused crawling, Akbari Torkestani 2012); with `speed` the crawl-speed controllers on
bandwidth traces, with `foragers` the forager fleets on a news site, with `revisits` the
revisit policies on the same site, with `manuals` focused crawls of the development set's
Debian manuals."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from frontierflow.pipelines.cli import (
    simulate_foragers,
    simulate_manuals,
    simulate_revisits,
    simulate_speed,
)
from frontierflow.pipelines.cli.common import (
    add_lafc_args,
    csv_list,
    lafc_plus_settings,
    lafc_settings,
    topic,
    tres_params,
)
from frontierflow.pipelines.cli.groups import Command, add_group
from frontierflow.pipelines.core.names import GRAPH_STRATEGIES

WEB_STRATEGIES = ("lafc", "best-first", "bfs")
"""The strategies `simulate --web` compares when `--strategies` is not given."""


def _ints(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in csv_list(value))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated node ids: {value}") from exc


def add_commands(sub: argparse._SubParsersAction[Any]) -> None:
    add_group(
        sub,
        "simulate",
        "simulations: crawls of a web graph or a topical web (default), speed, foragers, revisits, "
        "manuals",
        Command(
            "closed-loop crawls over a web graph (--graph) or a topical web (--web)",
            _arguments,
            simulate,
        ),
        {
            "speed": simulate_speed.COMMAND,
            "foragers": simulate_foragers.COMMAND,
            "revisits": simulate_revisits.COMMAND,
            "manuals": simulate_manuals.COMMAND,
        },
    )


def _arguments(sp: argparse.ArgumentParser) -> None:
    sp.add_argument(
        "--graph",
        default="uk-2007-05@100000",
        help="edge list (.tsv[.gz]), BVGraph basename/.graph, or a bundled name",
    )
    sp.add_argument(
        "--strategies",
        type=csv_list,
        default=None,
        help=f"default: {','.join(GRAPH_STRATEGIES)} for --graph; "
        f"{','.join(WEB_STRATEGIES)} for --web",
    )
    fw = sp.add_argument_group("focused crawls of a topical web (Akbari Torkestani 2012)")
    fw.add_argument(
        "--web",
        default=None,
        help="an HTML folder, 'debian-docs' or 'debian-docs:PKG,...' (infra/debian-docs)",
    )
    fw.add_argument(
        "--topic",
        action="append",
        default=[],
        help="a named topic (sockets, memory, ...), keywords, or 'kw:weight,...'; repeatable",
    )
    fw.add_argument("--cycles", type=int, default=3, help="crawl cycles")
    fw.add_argument("--runs", type=int, default=5, help="runs of the randomised strategies")
    fw.add_argument("--judge", type=float, default=0.75, help="relevant when similarity ≥ this")
    fw.add_argument(
        "--judge-min-occurrences",
        type=int,
        default=0,
        help="relevant also needs this many keyword occurrences",
    )
    add_lafc_args(fw)
    fw.add_argument(
        "--web-seeds", type=csv_list, default=(), help="seed URLs (default: each host's index)"
    )
    sp.add_argument("--stop-at", type=float, default=0.45, help="fraction of pages to crawl")
    # required, but checked by `simulate`: argparse would ask for it of `simulate speed` too
    sp.add_argument("--out", type=Path, default=None, help="output directory (required)")
    sp.add_argument("--seeds", type=_ints, default=None, help="seed node ids (default: 0)")
    sp.add_argument(
        "--random-seeds",
        type=int,
        default=None,
        metavar="N",
        help="instead of --seeds: N nodes with outlinks drawn at random (--seed)",
    )
    sp.add_argument(
        "--ieca-beta", type=float, default=None, help="IECA's β of eq. 5 (default: the paper's 0.1)"
    )
    sp.add_argument(
        "--ieca-k",
        type=int,
        default=None,
        help="IECA's k: δ_t and t step every k pages (default: budget / 40)",
    )
    sp.add_argument(
        "--ieca-plus-damping",
        type=float,
        default=None,
        help="IECA+'s scale of δ_t in a link's candidate (default: 0.75, see RESULTS)",
    )
    sp.add_argument(
        "--budget",
        type=int,
        default=None,
        help="budget the constants scale to (default: the graph's size)",
    )
    sp.add_argument("--points", type=int, default=90, help="points on each curve")
    sp.add_argument("--seed", type=int, default=0, help="seed of the random strategy")
    sp.add_argument("--no-progress", action="store_true", help="no progress bars")


def _simulate_web(args: argparse.Namespace) -> int:
    from frontierflow.connectors.topicalweb import load_web
    from frontierflow.pipelines.evaluation.focused import FocusedSetup, run_focused
    from frontierflow.state.relevance import TOPICS, Judge

    topics = [topic(t) for t in args.topic]
    if not topics:
        raise ValueError(f"--web needs --topic (named topics: {', '.join(TOPICS)})")
    setup = FocusedSetup(
        strategies=args.strategies or WEB_STRATEGIES,
        budget=args.budget or 2000,
        cycles=args.cycles,
        points=min(args.points, 10),
        runs=args.runs,
        judge=Judge(threshold=args.judge, min_occurrences=args.judge_min_occurrences),
        lafc=lafc_settings(args, 0),
        lafc_plus=lafc_plus_settings(args),
        tres=tres_params(args),
        seeds=args.web_seeds,
    )
    web = load_web(args.web)
    results = run_focused(web, topics, setup, args.out, str(args.web))
    for r in results:
        for c in r.curves:
            if c.cycle == setup.cycles - 1:
                print(
                    f"{r.topic:>14} {c.strategy:>12} cycle {c.cycle + 1}: precision "
                    f"{c.precision[-1]:.3f}, recall {c.recall[-1]:.3f} (pooled), "
                    f"{c.recall_all[-1]:.3f} (all reachable)"
                )
    print(f"wrote {args.out}/summary.md, focused.csv, precision_*.png")
    return 0


def simulate(args: argparse.Namespace) -> int:
    if args.out is None:
        raise ValueError("simulate needs --out DIR, the output directory")
    if args.web is not None:
        return _simulate_web(args)
    from frontierflow.connectors.graphfiles import read_graph
    from frontierflow.pipelines.evaluation.hot_pages import (
        HotPagesSetup,
        default_seeds,
        random_seeds,
        run_hot_pages,
    )

    graph = read_graph(args.graph)
    if args.random_seeds is not None:
        seeds = random_seeds(graph, args.random_seeds, args.seed)
    else:
        seeds = args.seeds or default_seeds(graph)
    ieca_overrides = {
        name: value
        for name, value in (("beta", args.ieca_beta), ("k", args.ieca_k))
        if value is not None
    }
    setup = HotPagesSetup(
        strategies=args.strategies or GRAPH_STRATEGIES,
        stop_at=args.stop_at,
        seeds=seeds,
        ieca_overrides=ieca_overrides,
        ieca_plus_damping=args.ieca_plus_damping,
        budget=args.budget,
        points=args.points,
        random_seed=args.seed,
        graph_name=str(args.graph),
    )
    progress = None if args.no_progress else _progress_bars
    curves = run_hot_pages(graph, setup, args.out, progress=progress)
    for curve in sorted(curves, key=lambda c: -c.hot_fraction[-1]):
        print(
            f"{curve.strategy:>18}  {curve.hot_fraction[-1]:6.1%} hot pages at "
            f"{curve.crawled_fraction[-1]:.1%} crawled"
        )
    print(f"wrote {args.out / 'hot_pages.csv'}, summary.md, hot_pages.png")
    return 0


def _progress_bars(name: str, total: int) -> Callable[..., None]:
    from tqdm import tqdm

    bar = tqdm(total=total, desc=f"{name:>18}", unit="page", mininterval=0.5, leave=True)

    def update(node: int, progress: object) -> None:
        bar.update(1)
        if bar.n >= total:
            bar.close()

    return update
