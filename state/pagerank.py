"""PageRank state per URL and the PageRank computation over a list of arcs.

`RankedUrl` is what the PageRank baselines (Golshani & ZarehBidoki 2012, §IV) remember per
URL, with its compact encoding; `pagerank_subgraph` is the power iteration they and the
hot-page evaluation share.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from frontierflow.state.storage.codec import StateCodecError

logger = logging.getLogger(__name__)

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

NOT_CRAWLED = -1


@dataclass(frozen=True, slots=True)
class RankedUrl:
    """A URL's PageRank estimate, whether it came from a full recomputation, its last
    crawled cycle, and (once fetched) its distinct outlinks."""

    estimate: float
    crawled_cycle: int = NOT_CRAWLED
    ranked: bool = False
    outlinks: tuple[str, ...] = ()

    def crawled_in(self, cycle: int) -> bool:
        return self.crawled_cycle >= cycle


_HEAD = struct.Struct("<diB")


def encode_ranked(state: RankedUrl) -> bytes:
    """Fixed head (float64 estimate, int32 cycle, ranked flag) then outlinks, NUL-joined."""
    try:
        head = _HEAD.pack(state.estimate, state.crawled_cycle, state.ranked)
        return head + "\0".join(state.outlinks).encode()
    except (struct.error, UnicodeEncodeError) as exc:
        raise StateCodecError(f"cannot encode {state!r}: {exc}") from exc


def decode_ranked(data: bytes) -> RankedUrl:
    """The state in bytes made by `encode_ranked`; StateCodecError if they are not one."""
    try:
        estimate, cycle, ranked = _HEAD.unpack_from(data)
        tail = data[_HEAD.size :]
        outlinks = tuple(tail.decode().split("\0")) if tail else ()
    except (struct.error, UnicodeDecodeError) as exc:
        raise StateCodecError(f"not a RankedUrl: {exc}") from exc
    if ranked > 1:
        raise StateCodecError(f"not a RankedUrl: ranked flag {ranked} is neither 0 nor 1")
    return RankedUrl(estimate, cycle, bool(ranked), outlinks)


def pagerank_subgraph(
    sources: npt.ArrayLike,
    targets: npt.ArrayLike,
    num_nodes: int,
    damping: float = 0.85,
    tol: float = 1e-10,
    max_iter: int = 200,
) -> FloatArray:
    """PageRank over the arcs `sources[i] -> targets[i]` between nodes 0..num_nodes-1.

    Repeated arcs count with their multiplicity; nodes without out-arcs are dangling.
    """
    src = np.asarray(sources, dtype=np.int64)
    dst = np.asarray(targets, dtype=np.int64)
    if src.ndim != 1 or src.shape != dst.shape:
        raise ValueError("sources and targets must be 1-D arrays of the same length")
    check_node_ids(src, num_nodes, "sources")
    check_node_ids(dst, num_nodes, "targets")
    if not 0.0 <= damping < 1.0 or tol <= 0.0 or max_iter < 1:
        raise ValueError("need 0 <= damping < 1, tol > 0 and max_iter >= 1")
    return _power_iteration(src, dst, num_nodes, damping, tol, max_iter)


def _power_iteration(
    src: IntArray, dst: IntArray, num_nodes: int, damping: float, tol: float, max_iter: int
) -> FloatArray:
    """r' = d·(Mᵀr + dangling(r)/n) + (1-d)/n, iterated until ‖r' - r‖₁ < tol."""
    if num_nodes == 0:
        return np.zeros(0, dtype=np.float64)
    outdegree = np.bincount(src, minlength=num_nodes).astype(np.float64)
    dangling = outdegree == 0
    inverse = np.divide(1.0, outdegree, out=np.zeros(num_nodes), where=~dangling)
    rank: FloatArray = np.full(num_nodes, 1.0 / num_nodes, dtype=np.float64)
    for iteration in range(1, max_iter + 1):
        spread = (rank * inverse)[src]
        new = damping * np.bincount(dst, weights=spread, minlength=num_nodes).astype(np.float64)
        new += (damping * rank[dangling].sum() + 1.0 - damping) / num_nodes
        new /= new.sum()
        change = float(np.abs(new - rank).sum())
        rank = new
        if change < tol:
            logger.debug("PageRank converged after %d iterations", iteration)
            return rank
    logger.warning("PageRank did not converge in %d iterations (L1 change %.3g)", max_iter, change)
    return rank


def check_node_ids(ids: IntArray, num_nodes: int, what: str) -> None:
    """ValueError unless every id in `ids` is a node of a graph of `num_nodes` nodes."""
    if ids.size and (ids.min() < 0 or ids.max() >= num_nodes):
        raise ValueError(f"{what} must be node ids in [0, {num_nodes})")
