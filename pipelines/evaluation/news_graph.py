"""Is the rebuilt news site a scale-free small world? Degree tails, clustering, path length.

Palotai, Farkas & Lőrincz 2005 (long version), §4.1) measured their CNN crawl (power-law
degrees, clustering 0.02, diameter 7.29) and a rewired copy (clustering 0.003, diameter
8.22) and called it a small world because rewiring dropped the clustering by an order of
magnitude and left the path length almost the same. We measure the same quantities on the
site's link graph at one moment.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from frontierflow.pipelines.evaluation.news_site import HOME, NewsSite, section_url


@dataclass(frozen=True, slots=True)
class GraphMeasures:
    nodes: int
    edges: int
    mean_out_degree: float
    max_in_degree: int
    in_exponent: float
    in_kmin: int
    out_exponent: float
    out_kmin: int
    clustering: float
    random_clustering: float
    path_length: float
    random_path_length: float


def site_graph(site: NewsSite, t: int) -> dict[str, tuple[str, ...]]:
    """Every page's links at time t (stories published by t, hubs as they were at t)."""
    urls = [HOME, *(section_url(s) for s in site.sections)]
    urls += [u for u, st in site.stories.items() if st.published_ms <= t]
    known = set(urls)
    return {u: tuple(v for v in site.page(u, t).links if v in known and v != u) for u in urls}


def power_law_fit(degrees: Sequence[int]) -> tuple[float, int]:
    """Discrete power-law exponent by maximum likelihood (Clauset, Shalizi, Newman 2009,
    eq. 3.7's approximation), with k_min chosen to minimise the Kolmogorov–Smirnov distance."""
    ks = np.array(sorted(d for d in degrees if d > 0), dtype=float)
    best = (math.inf, 0.0, 1)
    for kmin in range(1, 21):
        tail = ks[ks >= kmin]
        if len(tail) < 50:
            break
        alpha = 1.0 + len(tail) / float(np.sum(np.log(tail / (kmin - 0.5))))
        values = np.arange(kmin, int(tail.max()) + 1)
        model = np.cumsum(values ** (-alpha))
        model /= model[-1]
        empirical = np.searchsorted(tail, values, side="right") / len(tail)
        distance = float(np.max(np.abs(model - empirical)))
        if distance < best[0]:
            best = (distance, alpha, kmin)
    return best[1], best[2]


def _undirected(graph: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
    und: dict[str, set[str]] = {u: set() for u in graph}
    for u, vs in graph.items():
        for v in vs:
            und[u].add(v)
            und[v].add(u)
    return und


def clustering(und: Mapping[str, set[str]]) -> float:
    """Mean local clustering coefficient of the undirected graph (nodes of degree < 2: 0)."""
    total = 0.0
    for ns in und.values():
        k = len(ns)
        if k < 2:
            continue
        links = sum(len(und[v] & ns) for v in ns) / 2
        total += links / (k * (k - 1) / 2)
    return total / max(1, len(und))


def mean_path_length(graph: Mapping[str, Sequence[str]], sources: int, seed: int) -> float:
    """Mean directed shortest-path length over reachable pairs, from sampled sources."""
    nodes = list(graph)
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(nodes), size=min(sources, len(nodes)), replace=False)
    total = count = 0
    for i in picks:
        dist = {nodes[i]: 0}
        queue = deque([nodes[i]])
        while queue:
            u = queue.popleft()
            for v in graph[u]:
                if v not in dist:
                    dist[v] = dist[u] + 1
                    queue.append(v)
        total += sum(dist.values())
        count += len(dist) - 1
    return total / max(1, count)


def measure(graph: Mapping[str, Sequence[str]], sources: int = 200, seed: int = 0) -> GraphMeasures:
    n = len(graph)
    m = sum(len(v) for v in graph.values())
    indeg: dict[str, int] = dict.fromkeys(graph, 0)
    for vs in graph.values():
        for v in vs:
            indeg[v] += 1
    und = _undirected(graph)
    mean_und = sum(len(v) for v in und.values()) / max(1, n)
    in_alpha, in_kmin = power_law_fit(list(indeg.values()))
    out_alpha, out_kmin = power_law_fit([len(v) for v in graph.values()])
    return GraphMeasures(
        nodes=n,
        edges=m,
        mean_out_degree=m / max(1, n),
        max_in_degree=max(indeg.values(), default=0),
        in_exponent=in_alpha,
        in_kmin=in_kmin,
        out_exponent=out_alpha,
        out_kmin=out_kmin,
        clustering=clustering(und),
        random_clustering=mean_und / max(1, n - 1),
        path_length=mean_path_length(graph, sources, seed),
        random_path_length=math.log(n) / math.log(max(m / max(1, n), 1.0001)),
    )
