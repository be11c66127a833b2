"""The byte encoding of a TRES-style learner's state (`frontierflow.state.tres`): a header of
counts, then every array in a fixed order (little-endian), then the URL lists, each joined by
line feeds (a URL holds none). Wrong input raises `StateCodecError`."""

from __future__ import annotations

import struct

import numpy as np

from frontierflow.state.storage.codec import StateCodecError
from frontierflow.state.tres import DIMS, TresState
from frontierflow.state.tres_tree import TreeFrontier

VERSION = 1
_HEADER = struct.Struct("<BBqqqiiiiii")
"""version, dims, updates, draws, cycle, nodes, experience rows, frontier rows, and the byte
lengths of the frontier URLs, the fetched links and the seeds."""
_F8, _I4 = np.dtype("<f8"), np.dtype("<i4")


def _text(urls: list[str] | set[str]) -> bytes:
    return "\n".join(sorted(urls) if isinstance(urls, set) else urls).encode()


def _urls(data: bytes) -> list[str]:
    return data.decode().split("\n") if data else []


def encode_tres(state: TresState) -> bytes:
    tree = state.tree
    frontier_urls, fetched, seeds = _text(tree.urls), _text(state.fetched), _text(state.seeds)
    pending = state.pending.encode()
    header = _HEADER.pack(
        VERSION,
        DIMS,
        state.updates,
        state.draws,
        state.cycle,
        tree.nodes,
        len(tree.rewards),
        len(tree.urls),
        len(frontier_urls),
        len(fetched),
        len(seeds),
    )
    parts = [
        header,
        state.weights.astype(_F8).tobytes(),
        state.target.astype(_F8).tobytes(),
        struct.pack("<B", len(state.pending_x) > 0),
        state.pending_x.astype(_F8).tobytes(),
        state.pending_path.astype(_I4).tobytes(),
        tree.feature.astype(_I4).tobytes(),
        tree.threshold.astype(_F8).tobytes(),
        tree.left.astype(_I4).tobytes(),
        tree.right.astype(_I4).tobytes(),
        tree.depth.astype(_I4).tobytes(),
        tree.experience.astype(_F8).tobytes(),
        tree.rewards.astype(_F8).tobytes(),
        tree.experience_leaf.astype(_I4).tobytes(),
        tree.frontier.astype(_F8).tobytes(),
        tree.extra.astype(_I4).tobytes(),
        tree.frontier_leaf.astype(_I4).tobytes(),
        np.packbits(tree.live).tobytes(),
        frontier_urls,
        fetched,
        seeds,
        pending,
    ]
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise StateCodecError(f"TRES state truncated at byte {self.at} of {len(self.data)}")
        out = self.data[self.at : self.at + size]
        self.at += size
        return out

    def array(self, dtype: np.dtype, count: int) -> np.ndarray:
        return np.frombuffer(self.take(count * dtype.itemsize), dtype=dtype).astype(dtype.type)


def decode_tres(data: bytes) -> TresState:
    reader = _Reader(data)
    try:
        fields = _HEADER.unpack(reader.take(_HEADER.size))
    except struct.error as exc:
        raise StateCodecError(f"bad TRES state header: {exc}") from exc
    version, dims, updates, draws, cycle, nodes, experience, frontier = fields[:8]
    frontier_bytes, fetched_bytes, seeds_bytes = fields[8:]
    if version != VERSION or dims != DIMS:
        raise StateCodecError(f"TRES state version {version} with {dims} features unknown")
    weights = reader.array(_F8, dims)
    target = reader.array(_F8, dims)
    has_x = reader.take(1) == b"\x01"
    pending_x = reader.array(_F8, dims if has_x else 0)
    pending_path = reader.array(_I4, 3)
    tree = TreeFrontier(
        dims,
        feature=reader.array(_I4, nodes),
        threshold=reader.array(_F8, nodes),
        left=reader.array(_I4, nodes),
        right=reader.array(_I4, nodes),
        depth=reader.array(_I4, nodes),
        experience=reader.array(_F8, experience * dims).reshape(experience, dims),
        rewards=reader.array(_F8, experience),
        experience_leaf=reader.array(_I4, experience),
        frontier=reader.array(_F8, frontier * dims).reshape(frontier, dims),
        extra=reader.array(_I4, frontier * 3).reshape(frontier, 3),
        frontier_leaf=reader.array(_I4, frontier),
    )
    packed = np.frombuffer(reader.take((frontier + 7) // 8), dtype=np.uint8)
    tree.live = np.unpackbits(packed, count=frontier).astype(bool)
    try:
        tree.urls = _urls(reader.take(frontier_bytes))
        fetched = set(_urls(reader.take(fetched_bytes)))
        seeds = _urls(reader.take(seeds_bytes))
        pending = reader.data[reader.at :].decode()
    except UnicodeDecodeError as exc:
        raise StateCodecError(f"TRES state URLs are not UTF-8: {exc}") from exc
    if len(tree.urls) != frontier:
        raise StateCodecError(f"TRES state has {len(tree.urls)} frontier URLs, not {frontier}")
    return TresState(
        weights,
        target,
        updates,
        draws,
        cycle,
        tree,
        fetched,
        seeds,
        pending,
        pending_x,
        pending_path,
    )
