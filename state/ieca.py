"""IECA's per-URL state and its pure transitions (Golshani & ZarehBidoki 2012).

A URL's state is its logarithmic distance from the seeds (∞ while unknown) and the last
crawl cycle in which it was fetched. A link i → j updates j with eq. 13 when j is new and
with eq. 10 when j is known but not yet crawled; the balancing factor δ_t (eq. 12) and the
learning rate α (eq. 5) come from the global crawl clock. Smaller distance = sooner.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Collection
from dataclasses import dataclass
from itertools import starmap
from typing import NamedTuple

from frontierflow.state.storage.codec import StateCodecError

UNKNOWN = math.inf
NOT_CRAWLED = -1


@dataclass(frozen=True, slots=True)
class IecaParams:
    """The constants of Golshani & ZarehBidoki 2012, with the paper's values as defaults.

    The paper ran 10M-page graphs with k = 250,000, i.e. k = budget / 40; `for_budget`
    keeps that ratio for a crawl of any size, so δ_t and α step the same 40 times.
    """

    budget: int = 10_000_000
    """Pages the crawl may fetch (the graph size when it is known); eq. 12's denominator."""
    k: int = 250_000
    """δ_t and t = crawled div k are updated every k crawled pages (Algorithm 1)."""
    beta: float = 0.1
    """Eq. 5: α = exp(−β·t)."""
    delta_start: float = 0.35
    """Eq. 12 intercept: δ_t at the start of the crawl (paper: best in [0.3, 0.35])."""
    delta_slope: float = 0.28
    """Eq. 12 slope: δ_t falls by this much over the whole budget."""
    seed_distance: float = 0.3
    """Algorithm 1: the distance a starting page is given."""

    def __post_init__(self) -> None:
        if self.budget < 1 or self.k < 1:
            raise ValueError(f"IECA budget and k must be >= 1, got {self.budget}, {self.k}")
        if not (self.beta >= 0 and math.isfinite(self.beta)):
            raise ValueError(f"IECA beta must be finite and >= 0, got {self.beta}")
        if not 0 <= self.delta_start <= 1 or not 0 <= self.delta_start - self.delta_slope <= 1:
            raise ValueError("IECA delta_t must stay within [0, 1] over the crawl")
        if not (self.seed_distance > 0 and math.isfinite(self.seed_distance)):
            raise ValueError(f"IECA seed distance must be finite and > 0: {self.seed_distance}")

    @classmethod
    def for_budget(cls, budget: int, **overrides: float) -> IecaParams:
        """Paper constants with k scaled to the budget as 250,000 is to 10M pages;
        `overrides` replace any constant (`k` given here is taken as is)."""
        values: dict[str, float] = {"k": max(1, budget // 40), **overrides}
        if "k" in values:
            values["k"] = int(values["k"])
        return cls(budget=budget, **values)  # type: ignore[arg-type]


def delta_t(crawled: int, p: IecaParams) -> float:
    """Eq. 12: δ_t = 0.35 − 0.28·(share crawled), refreshed every k pages (Algorithm 1).

    The share is taken at the last multiple of k reached (lines 9–12 of Algorithm 1
    update δ only when size % k == 0; before the first update δ holds its start value)
    and is capped at 1 so a crawl past its budget keeps δ at its final value.
    """
    step_start = (crawled // p.k) * p.k
    share = min(1.0, step_start / p.budget)
    return p.delta_start - p.delta_slope * share


def alpha(crawled: int, p: IecaParams) -> float:
    """Eq. 5: α = e^(−β·t) with t = crawled div k (Algorithm 1, lines 8 and 13)."""
    return math.exp(-p.beta * (crawled // p.k))


def link_weight(outdegree: int) -> float:
    """Definition 1: the weight of each link out of a page with `outdegree` links."""
    return math.log10(outdegree) if outdegree > 0 else 0.0


def pc_coefficient(d_child: float, d_parent: float) -> float:
    """Eq. 8, the parent–child (P-C) coefficient f(d_j, d_i).

    d_j / d_i when both distances have the same sign, (d_j − d_i) / |d_i| otherwise.
    Signs: zero counts as non-negative. d_i = 0 leaves f undefined; we return 0 so the
    caller's guard (`structure_term`) drops the term — see there.
    """
    if d_parent == 0.0:
        return 0.0
    if (d_child >= 0.0) == (d_parent >= 0.0):
        return d_child / d_parent
    return (d_child - d_parent) / abs(d_parent)


def structure_term(d_child: float, d_parent: float) -> float:
    """log10 f(d_j, d_i), the web-structure feature of eq. 10, with the paper's holes closed.

    The paper leaves log10 f undefined when f ≤ 0 (eq. 8's second branch gives f < 0 when
    a negative child distance sits below a positive parent; f = 0 when d_j = 0) and when
    d_i = 0 (division by zero). We define the term as 0 in all those cases: the incoming
    link then brings no structure bonus or penalty, only the learned part of eq. 10.
    """
    f = pc_coefficient(d_child, d_parent)
    if not f > 0.0 or not math.isfinite(f):
        return 0.0
    return math.log10(f)


def new_distance(d_parent: float, weight: float, delta: float) -> float:
    """Eq. 13: a newly discovered page j gets d_j = (1 − δ_t)·d_i + log10 O(i)."""
    return (1.0 - delta) * d_parent + weight


def updated_distance(
    d_child: float, d_parent: float, weight: float, delta: float, a: float
) -> float:
    """Eq. 10 for a page j already known but not yet crawled:

    d_j ← (1 − δ_t)·((1 − α)·d_j + α·(log10 O(i) + (1 − δ_t)·d_i)) − δ_t·log10 f(d_j, d_i).
    """
    learned = (1.0 - a) * d_child + a * (weight + (1.0 - delta) * d_parent)
    return (1.0 - delta) * learned - delta * structure_term(d_child, d_parent)


class IecaDistance(NamedTuple):
    """IECA state of one URL: its distance (∞ unknown) and the last cycle it was crawled.

    A NamedTuple rather than a frozen dataclass: one is made per link, and tuples are
    several times cheaper to build.
    """

    distance: float = UNKNOWN
    crawled_cycle: int = NOT_CRAWLED

    def crawled_in(self, cycle: int) -> bool:
        return self.crawled_cycle >= cycle

    def after_link(
        self, d_parent: float, weight: float, cycle: int, delta: float, a: float
    ) -> IecaDistance:
        """The state after a link from a parent at distance d_parent (eqs. 13 and 10),
        with δ_t = `delta` (eq. 12) and α = `a` (eq. 5) taken from the crawl clock.

        A page already crawled in this cycle keeps its state (Algorithm 1, line 16).
        """
        distance, crawled_cycle = self
        if crawled_cycle >= cycle:
            return self
        if distance == UNKNOWN:
            return _new_state(IecaDistance, (new_distance(d_parent, weight, delta), crawled_cycle))
        d = updated_distance(distance, d_parent, weight, delta, a)
        return _new_state(IecaDistance, (d, crawled_cycle))


_new_state = tuple.__new__
"""`IecaDistance(d, c)` without the Python-level `__new__` of a NamedTuple: one per link."""


def clock_coefficients(crawled: int, p: IecaParams) -> tuple[float, float]:
    """(δ_t, α) for a crawl that has fetched `crawled` pages (eqs. 12 and 5)."""
    return delta_t(crawled, p), alpha(crawled, p)


_STATE = struct.Struct("<di")


def encode_ieca(state: IecaDistance) -> bytes:
    """12 bytes: little-endian float64 distance, int32 last crawled cycle."""
    try:
        return _STATE.pack(state.distance, state.crawled_cycle)
    except struct.error as exc:
        raise StateCodecError(f"cannot encode {state!r}: {exc}") from exc


def encode_ieca_many(states: Collection[IecaDistance]) -> list[bytes]:
    """`encode_ieca` of each state, in order, packed in one C-level pass (a step writes
    thousands); a state that cannot be packed raises `encode_ieca`'s StateCodecError."""
    try:
        return list(starmap(_STATE.pack, states))
    except struct.error:
        for state in states:
            encode_ieca(state)  # names the state that failed
        raise


def decode_ieca(data: bytes) -> IecaDistance:
    """The state in the 12 bytes of `encode_ieca`; StateCodecError for anything else."""
    if len(data) != _STATE.size:
        raise StateCodecError(f"an IECA state needs {_STATE.size} bytes, got {len(data)}")
    return _new_state(IecaDistance, _STATE.unpack(data))
