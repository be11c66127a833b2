"""The state of the simple baselines: one score per URL and the cycle it was last crawled.

Breadth-first keeps a depth, backlink count a count, OPIC a cash amount, random a draw;
all fit this record and its 12-byte encoding.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

NOT_CRAWLED = -1


class ScoredUrl(NamedTuple):
    """A URL's score under a baseline and the last cycle it was crawled (−1: never)."""

    score: float
    crawled_cycle: int = NOT_CRAWLED

    def crawled_in(self, cycle: int) -> bool:
        return self.crawled_cycle >= cycle


_STATE = struct.Struct("<di")


def encode_scored(state: ScoredUrl) -> bytes:
    """12 bytes: little-endian float64 score, int32 last crawled cycle."""
    return _STATE.pack(state.score, state.crawled_cycle)


def decode_scored(data: bytes) -> ScoredUrl:
    score, cycle = _STATE.unpack(data)
    return ScoredUrl(score, cycle)
