"""The web graph a crawl simulation walks: the `WebGraph` type, edge-list files and PageRank.

A graph is held in compressed sparse rows (`WebGraph`), so a simulated crawler can fetch any
page's out-links in O(1). PageRank is one power-iteration core used both for a whole graph and
for the partially known graph a crawl has discovered so far (`frontierflow.state.pagerank`).
"""

from __future__ import annotations

import gzip
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from frontierflow.state.pagerank import check_node_ids, pagerank_subgraph

IntArray = npt.NDArray[np.int64]
NodeArray = npt.NDArray[np.int32]
FloatArray = npt.NDArray[np.float64]
PathLike = str | os.PathLike[str]

#: The largest node id: successor lists are int32.
MAX_NODE_ID = int(np.iinfo(np.int32).max)
_GZIP_MAGIC = b"\x1f\x8b"
_COMMENT_LINE = re.compile(rb"(?m)^[ \t]*#[^\n]*(?:\n|\Z)")


URL_PREFIX = "https://n"
URL_SUFFIX = ".graph.invalid/"


def node_url(node: int) -> str:
    """The URL a graph node gets in simulated crawls and benchmark logs (the reserved
    .invalid TLD: never fetched)."""
    return f"{URL_PREFIX}{node}{URL_SUFFIX}"


def url_node(url: str) -> int:
    """The node behind a `node_url`."""
    return int(url[len(URL_PREFIX) : -len(URL_SUFFIX)])


class GraphFormatError(ValueError):
    """A graph file is missing, malformed, truncated, or uses an unsupported feature."""


# --------------------------------------------------------------------------------------------
# The in-memory graph
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class WebGraph:
    """A directed graph in CSR form: node x's successors are successors[offsets[x]:offsets[x+1]]."""

    offsets: IntArray
    successors: NodeArray

    def __post_init__(self) -> None:
        offsets = np.ascontiguousarray(self.offsets, dtype=np.int64)
        successors = np.asarray(self.successors)
        if offsets.ndim != 1 or offsets.size == 0 or successors.ndim != 1:
            raise ValueError("offsets must be 1-D of length n+1 and successors 1-D")
        num_nodes = offsets.size - 1
        if offsets[0] != 0 or offsets[-1] != successors.size or np.any(np.diff(offsets) < 0):
            raise ValueError("offsets must start at 0, never decrease and end at len(successors)")
        if successors.size and (successors.min() < 0 or successors.max() >= num_nodes):
            raise ValueError(f"successors must be node ids in [0, {num_nodes})")
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "successors", np.ascontiguousarray(successors, dtype=np.int32))

    @classmethod
    def from_arcs(
        cls, sources: npt.ArrayLike, targets: npt.ArrayLike, num_nodes: int | None = None
    ) -> WebGraph:
        """Builds the CSR of an arc list, keeping each node's arcs in their given order."""
        src = np.asarray(sources, dtype=np.int64)
        dst = np.asarray(targets, dtype=np.int64)
        if src.ndim != 1 or src.shape != dst.shape:
            raise ValueError("sources and targets must be 1-D arrays of the same length")
        if num_nodes is None:
            num_nodes = int(max(src.max(), dst.max())) + 1 if src.size else 0
        check_node_ids(src, num_nodes, "sources")
        if src.size > 1 and np.any(src[1:] < src[:-1]):
            order = np.argsort(src, kind="stable")
            src, dst = src[order], dst[order]
        offsets = np.zeros(num_nodes + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=num_nodes), out=offsets[1:])
        return cls(offsets, dst.astype(np.int32))

    @property
    def num_nodes(self) -> int:
        """The number of nodes, ids 0..num_nodes-1."""
        return int(self.offsets.size - 1)

    @property
    def num_arcs(self) -> int:
        """The number of arcs."""
        return int(self.successors.size)

    def successors_of(self, node: int) -> NodeArray:
        """The successors of `node`, as a view into `successors`."""
        return self.successors[self.offsets[node] : self.offsets[node + 1]]

    def outdegree(self, node: int) -> int:
        """The number of arcs leaving `node`."""
        return int(self.offsets[node + 1] - self.offsets[node])

    def outdegrees(self) -> IntArray:
        """The outdegree of every node."""
        return np.diff(self.offsets)

    def indegrees(self) -> IntArray:
        """The indegree of every node."""
        return np.bincount(self.successors, minlength=self.num_nodes).astype(np.int64)

    def sources(self) -> NodeArray:
        """The source of every arc, aligned with `successors`."""
        nodes = np.arange(self.num_nodes, dtype=np.int32)
        return np.repeat(nodes, self.outdegrees())


def read_edge_list(path: PathLike) -> WebGraph:
    """Reads `src dst` lines (whitespace separated, `#` comments, optionally gzipped).

    The node count is the largest id plus one; each node keeps its arcs in file order.
    """
    raw = read_graph_file(Path(path))
    if raw.startswith(_GZIP_MAGIC) or str(path).endswith(".gz"):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as exc:
            raise GraphFormatError(f"{path}: not a valid gzip file: {exc}") from exc
    data = _COMMENT_LINE.sub(b"", raw) if b"#" in raw else raw
    values = _parse_integers(data, path)
    if values.size != 2 * _count_lines(data):
        _raise_on_bad_line(raw, path)
    if values.size and (values.min() < 0 or values.max() > MAX_NODE_ID):
        raise GraphFormatError(f"{path}: node ids must be in [0, {MAX_NODE_ID}]")
    pairs = values.reshape(-1, 2)
    return WebGraph.from_arcs(pairs[:, 0], pairs[:, 1])


def read_graph_file(path: Path) -> bytes:
    """The bytes of a graph file; GraphFormatError if it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise GraphFormatError(f"cannot read graph file {path}: {exc}") from exc


def _parse_integers(data: bytes, path: PathLike) -> IntArray:
    try:
        return np.fromstring(data, dtype=np.int64, sep=" ")
    except ValueError as exc:
        raise GraphFormatError(f"{path}: not a list of integer pairs ({exc})") from exc


def _count_lines(data: bytes) -> int:
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _raise_on_bad_line(raw: bytes, path: PathLike) -> None:
    """Slow path, taken only when tokens and lines disagree: blank lines are fine, others not."""
    for number, line in enumerate(raw.splitlines(), start=1):
        fields = line.split()
        if fields and not fields[0].startswith(b"#") and len(fields) != 2:
            raise GraphFormatError(f"{path}:{number}: expected 2 fields, found {len(fields)}")


def pagerank(
    graph: WebGraph, damping: float = 0.85, tol: float = 1e-10, max_iter: int = 200
) -> FloatArray:
    """PageRank of every node (sums to 1), uniform teleport, dangling mass spread uniformly."""
    return pagerank_subgraph(
        graph.sources(), graph.successors, graph.num_nodes, damping, tol, max_iter
    )
