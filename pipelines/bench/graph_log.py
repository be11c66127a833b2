"""A benchmark log of real pages: a breadth-first crawl of a web graph, each page with its
real outlinks.

The generated log (`bench.engine.generated_events`) gives every page 30 outlinks drawn
from 200,000 URLs. A real crawl's pages link less and mostly to pages the crawl already
knows: on the bundled LAW sample `uk-2007-05@100000` (Boldi & Vigna 2004) the first
20,000 pages of a breadth-first crawl from node 0 have a median of 14 outlinks (mean 25)
and reach only 22,069 distinct URLs. Per-page costs then weigh more than per-link ones,
which is what a runner's per-element overhead shows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from frontierflow.connectors.graphfiles import WebGraph, read_graph
from frontierflow.connectors.webgraph import node_url
from frontierflow.pipelines.bench.engine import bench_event
from frontierflow.schemas.container import write_container

GRAPH_CRAWL_ID = "bench"


def breadth_first(graph: WebGraph, pages: int, start: int = 0) -> list[int]:
    """The first `pages` nodes a breadth-first crawl from `start` fetches (each node's
    successors in the graph's order), fewer if fewer are reachable."""
    seen = np.zeros(graph.num_nodes, dtype=np.bool_)
    seen[start] = True
    queue, order = deque([start]), list[int]()
    offsets, successors = graph.offsets, graph.successors
    while queue and len(order) < pages:
        node = queue.popleft()
        order.append(node)
        for j in successors[offsets[node] : offsets[node + 1]].tolist():
            if not seen[j]:
                seen[j] = True
                queue.append(j)
    return order


def graph_events(graph: WebGraph, pages: int) -> Iterator[dict[str, object]]:
    """The crawl as the bench's FetchEvents (`bench_event`: one a millisecond, a 200 of
    20 kB, IECA's distance echoed as in the generated log)."""
    offsets, successors = graph.offsets, graph.successors
    for i, node in enumerate(breadth_first(graph, pages)):
        links = [node_url(j) for j in successors[offsets[node] : offsets[node + 1]].tolist()]
        yield bench_event(node_url(node), i, links, GRAPH_CRAWL_ID, 0.3 + (i % 50) / 10)


def write_graph_log(path: Path, graph: str, pages: int) -> tuple[int, float]:
    """Write the breadth-first crawl of `graph` (a bundled name, a BVGraph or an edge
    list: `connectors.graphfiles.read_graph`) as an Avro log; (events, mean outlinks)."""
    web = read_graph(graph)
    events = list(graph_events(web, pages))
    write_container(path, "FetchEvent", events, codec="null")
    links = sum(len(e["outlinks"]) for e in events)  # type: ignore[misc, arg-type]
    return len(events), links / max(1, len(events))
