"""The reinforcing agent (RA) of Palotai, Farkas & Lőrincz 2005's forager fleets as keyed state +
pure transitions.

The RA judges what the foragers send (Alg. "manage received URL"): a document it has not
rewarded before and that is not older than 24 hours is relevant and earns the reward, the
rest earn the penalty; it keeps each forager's score (a send costs, a relevant document
pays), multiplies a forager whose score reaches the upper threshold and deletes one below
the lower threshold (Alg. "manage forager"), and gives the foragers time slices in turn.
Its state is keyed like any other: a `DocumentVerdict` per document URL (the dedup) and a
`Fleet` per crawl (population, scores, whose turn it is).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from enum import Enum

from frontierflow.state.forager import HOUR_MS, Reader
from frontierflow.state.storage.codec import StateCodecError


@dataclass(frozen=True, slots=True)
class AgentParams:
    """The RA's constants. "paper" = stated in the papers; "ours" = lost (@xmath)."""

    reward: float = 1.0
    """Reinforcement for a relevant document (ours: @xmath75, "a.u.")."""
    penalty: float = -0.1
    """Reinforcement for any other document (ours: @xmath76)."""
    initial_score: float = 1.0
    """A forager's score at creation and after a multiplication (ours: @xmath77, @xmath101)."""
    send_cost: float = 0.05
    """Score taken for every document sent (ours: @xmath78; break-even sent efficiency 5%)."""
    relevant_gain: float = 1.0
    """Score given for every relevant document (ours: @xmath79)."""
    multiply_at: float = 3.0
    """A forager whose score reaches this multiplies (ours: @xmath88)."""
    delete_below: float = 0.0
    """A forager whose score goes below this is deleted (ours: @xmath90)."""
    min_population: int = 2
    """Initial fleet size and the size deletion never goes below (paper: 2, @xmath105)."""
    max_population: int = 16
    """Multiplication stops at this many foragers (paper: "until reaching ... 16")."""
    time_slice_ms: int = 3 * 60_000
    """How long each forager works in its turn (paper's web experiment: 3 minutes)."""
    max_age_ms: int = 24 * HOUR_MS
    """A document older than this is not relevant (paper: 24 hours)."""

    def __post_init__(self) -> None:
        numbers = (self.reward, self.penalty, self.initial_score, self.send_cost)
        if not all(math.isfinite(v) for v in (*numbers, self.relevant_gain, self.multiply_at)):
            raise ValueError("agent rewards, scores and thresholds must be finite")
        if not self.delete_below < self.initial_score < self.multiply_at:
            raise ValueError("agent thresholds need delete_below < initial_score < multiply_at")
        if not 1 <= self.min_population <= self.max_population:
            raise ValueError("agent populations need 1 <= min_population <= max_population")
        if self.time_slice_ms < 1 or self.max_age_ms < 0:
            raise ValueError("agent time slice must be >= 1 ms and max age >= 0")


@dataclass(frozen=True, slots=True)
class DocumentVerdict:
    """The RA's memory of one document (key = its URL): who sent it first, and when."""

    rewarded_ms: int
    forager_id: int


@dataclass(frozen=True, slots=True)
class Judgement:
    """The RA's answer to one sent document."""

    relevant: bool
    reinforcement: float


def judge(
    verdict: DocumentVerdict | None,
    forager_id: int,
    published_ms: int | None,
    now_ms: int,
    on_topic: bool,
    params: AgentParams,
) -> tuple[DocumentVerdict | None, Judgement]:
    """Alg. "manage received URL": relevant when on topic (our rule; the paper's site was
    all news), not yet seen by the RA and not older than 24 hours — only the first
    submitter is rewarded; anything else is penalised. Only relevant documents are
    remembered (the paper adds p to R in the relevant branch only)."""
    fresh = published_ms is not None and 0 <= now_ms - published_ms <= params.max_age_ms
    if verdict is None and fresh and on_topic:
        return DocumentVerdict(now_ms, forager_id), Judgement(True, params.reward)
    return verdict, Judgement(False, params.penalty)


class Decision(Enum):
    KEEP = "keep"
    MULTIPLY = "multiply"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Fleet:
    """The RA's state of one crawl: foragers in turn order with their scores."""

    foragers: tuple[int, ...]
    scores: tuple[float, ...]
    next_id: int
    """The id the next forager born will get."""

    def score(self, forager_id: int) -> float:
        return self.scores[self.foragers.index(forager_id)]


def new_fleet(params: AgentParams) -> Fleet:
    """Alg. "reinforcing agent": initialise the first foragers (ids 0, 1, …)."""
    n = params.min_population
    return Fleet(tuple(range(n)), (params.initial_score,) * n, n)


def score_send(fleet: Fleet, forager_id: int, relevant: bool, params: AgentParams) -> Fleet:
    """A send costs `send_cost`; a relevant one also pays `relevant_gain`."""
    i = fleet.foragers.index(forager_id)
    delta = -params.send_cost + (params.relevant_gain if relevant else 0.0)
    scores = (*fleet.scores[:i], fleet.scores[i] + delta, *fleet.scores[i + 1 :])
    return replace(fleet, scores=scores)


def manage_forager(
    fleet: Fleet, forager_id: int, params: AgentParams
) -> tuple[Fleet, Decision, int | None]:
    """Alg. "manage forager", after the forager's time slice: multiply when its score
    reaches `multiply_at` and the fleet is below its maximum (the child is appended to
    the turn order, both scores reset); delete when its score is below `delete_below` and
    the fleet is above its minimum. Returns the fleet, the decision and the child's id."""
    i = fleet.foragers.index(forager_id)
    score = fleet.scores[i]
    n = len(fleet.foragers)
    if score >= params.multiply_at and n < params.max_population:
        child = fleet.next_id
        scores = list(fleet.scores)
        scores[i] = params.initial_score
        grown = Fleet((*fleet.foragers, child), (*scores, params.initial_score), fleet.next_id + 1)
        return grown, Decision.MULTIPLY, child
    if score < params.delete_below and n > params.min_population:
        shrunk = Fleet(
            fleet.foragers[:i] + fleet.foragers[i + 1 :],
            fleet.scores[:i] + fleet.scores[i + 1 :],
            fleet.next_id,
        )
        return shrunk, Decision.DELETE, None
    return fleet, Decision.KEEP, None


def next_forager(fleet: Fleet, previous: int | None) -> int:
    """Round robin: the forager after `previous` in turn order. If `previous` was just
    deleted, the forager that took its place is next (ours: the paper's RA "chooses next")."""
    if previous is None:
        return fleet.foragers[0]
    if previous in fleet.foragers:
        i = fleet.foragers.index(previous) + 1
    else:
        i = sum(1 for f in fleet.foragers if f < previous)  # ids grow along the turn order
    return fleet.foragers[i % len(fleet.foragers)]


# --- codecs ------------------------------------------------------------------------------
# DocumentVerdict v1: u8 version, i64 rewarded_ms, u32 forager id (13 bytes).
# Fleet v1: u8 version, u32 next id, u16 n, then n × (u32 id, f64 score).

_VERDICT = struct.Struct("<BqI")
_FLEET_HEAD = struct.Struct("<BIH")
_MEMBER = struct.Struct("<Id")


def encode_verdict(verdict: DocumentVerdict) -> bytes:
    try:
        return _VERDICT.pack(1, verdict.rewarded_ms, verdict.forager_id)
    except struct.error as exc:
        raise StateCodecError(f"document verdict out of range: {exc}") from exc


def decode_verdict(data: bytes) -> DocumentVerdict:
    if len(data) != _VERDICT.size:
        raise StateCodecError(f"a document verdict is {_VERDICT.size} bytes, got {len(data)}")
    version, rewarded_ms, forager_id = _VERDICT.unpack(data)
    if version != 1:
        raise StateCodecError(f"document verdict version {version} is not supported")
    return DocumentVerdict(rewarded_ms, forager_id)


def encode_fleet(fleet: Fleet) -> bytes:
    if len(fleet.foragers) != len(fleet.scores):
        raise StateCodecError("a fleet needs one score per forager")
    try:
        out = bytearray(_FLEET_HEAD.pack(1, fleet.next_id, len(fleet.foragers)))
        for forager_id, score in zip(fleet.foragers, fleet.scores, strict=True):
            out += _MEMBER.pack(forager_id, score)
    except struct.error as exc:
        raise StateCodecError(f"fleet field out of range: {exc}") from exc
    return bytes(out)


def decode_fleet(data: bytes) -> Fleet:
    r = Reader(bytes(data), "fleet state")
    version, next_id, n = _FLEET_HEAD.unpack(r.take(_FLEET_HEAD.size))
    if version != 1:
        raise StateCodecError(f"fleet state version {version} is not supported")
    members = [_MEMBER.unpack(r.take(_MEMBER.size)) for _ in range(n)]
    r.done()
    return Fleet(tuple(m[0] for m in members), tuple(m[1] for m in members), next_id)
