"""The state of the simple baselines: one score per URL and the cycle it was last crawled.

Breadth-first keeps a depth, backlink count a count, OPIC a cash amount, random a draw;
all fit this record and its 16-byte encoding.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from frontierflow.state.storage.codec import StateCodecError

NOT_CRAWLED = -1


class ScoredUrl(NamedTuple):
    """A URL's score under a baseline, the last cycle it was crawled (−1: never) and the
    cycle the score was set in (a baseline does not learn: each cycle scores afresh)."""

    score: float
    crawled_cycle: int = NOT_CRAWLED
    score_cycle: int = 0

    def crawled_in(self, cycle: int) -> bool:
        return self.crawled_cycle >= cycle


_STATE = struct.Struct("<dii")
_STATE_V0 = struct.Struct("<di")


def encode_scored(state: ScoredUrl) -> bytes:
    """16 bytes: little-endian float64 score, int32 last crawled cycle, int32 score cycle."""
    try:
        return _STATE.pack(state.score, state.crawled_cycle, state.score_cycle)
    except struct.error as exc:
        raise StateCodecError(f"cannot encode {state!r}: {exc}") from exc


def decode_scored(data: bytes) -> ScoredUrl:
    """Reads the 16-byte form and the earlier 12-byte one (score cycle 0); StateCodecError
    for any other length."""
    if len(data) == _STATE_V0.size:
        score, cycle = _STATE_V0.unpack(data)
        return ScoredUrl(score, cycle)
    if len(data) != _STATE.size:
        raise StateCodecError(
            f"a baseline score needs {_STATE.size} or {_STATE_V0.size} bytes, got {len(data)}"
        )
    score, cycle, score_cycle = _STATE.unpack(data)
    return ScoredUrl(score, cycle, score_cycle)
