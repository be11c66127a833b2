"""IECA+'s per-URL state and its pure transitions: IECA's distance read as log-cash.

Golshani & ZarehBidoki 2012's distance is the logarithm of a path's weight: d = Σ log10 O(i)
along a path is −log10 of the chance that a random surfer follows it, so 10^(−d) is the cash
(OPIC, Abiteboul et al. 2003) that reaches the page along that path. IECA (eq. 10) keeps one
path per page and, as α = e^(−β·t) decays with the global clock, stops listening to new
parents: by 45% of the crawl every update keeps 83% of a page's old distance. IECA+ keeps
every parent instead: each in-link adds its cash 10^(−candidate) to the page, and the
distance is −log10 of the sum. Nothing decays with time, so a page that collects many good
in-links late is pulled forward however late they come. Smaller distance = sooner.

Departures from the paper, each with its reason:
- eq. 10 is replaced by the log-sum above (`evidence_distance`): eq. 10 averages paths, so
  a page's in-link count barely matters (only through the structure term), and its α
  freezes the average; a sum rewards every parent, as OPIC and PageRank do. A page's first
  link still gets eq. 13's distance exactly (a sum of one term).
- the structure term δ_t·log10 f of eq. 10 is dropped: with a sum the in-link evidence is
  already counted, and on the tuning seed keeping it lowered the hot-page share.
- eq. 13's damping of the parent's distance is kept for every link, not only the first,
  and scaled: (1 − s·δ_t)·d_i with s = 0.75. In cash terms a parent pays
  c^(1−s·δ_t)/O(i), which keeps deep pages from starving as PageRank's teleport does;
  s = 0 is one-pass OPIC and s = 1 eq. 13 itself. s was chosen on the development crawls
  (node 0 and ten other random seeds, none of the hundred reported), see docs/RESULTS.md.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import NamedTuple

from frontierflow.state.ieca import NOT_CRAWLED, UNKNOWN, IecaParams, delta_t, new_distance
from frontierflow.state.storage.codec import StateCodecError


@dataclass(frozen=True, slots=True)
class IecaPlusParams:
    """IECA's clock constants (δ_t of eq. 12, seed distance) and IECA+'s own."""

    ieca: IecaParams = field(default_factory=IecaParams)
    """δ_t's schedule, the budget it is a share of, and the seeds' distance (Golshani &
    ZarehBidoki 2012)."""
    damping_scale: float = 0.75
    """A link's candidate uses (1 − scale·δ_t)·d_i: 1 is eq. 13's damping, 0 is OPIC's.
    0.75 was chosen on the development crawls (docs/RESULTS.md, IECA+)."""

    def __post_init__(self) -> None:
        if not (self.damping_scale >= 0.0 and math.isfinite(self.damping_scale)):
            raise ValueError(f"IECA+ damping scale must be finite and >= 0: {self.damping_scale}")
        if self.damping_scale * self.ieca.delta_start > 1.0:
            raise ValueError("IECA+ damping scale · δ_t must stay within [0, 1]")

    @classmethod
    def for_budget(cls, budget: int, **overrides: float) -> IecaPlusParams:
        """IECA's constants scaled to `budget` (`IecaParams.for_budget`), IECA+'s as given."""
        own = {k: overrides.pop(k) for k in ("damping_scale",) if k in overrides}
        return cls(IecaParams.for_budget(budget, **overrides), **own)


def link_damping(crawled: int, p: IecaPlusParams) -> float:
    """The δ a link's candidate is damped with: eq. 12's δ_t times `damping_scale`."""
    return p.damping_scale * delta_t(crawled, p.ieca)


def evidence_distance(d_child: float, candidate: float) -> float:
    """The distance after one more in-link: −log10(10^(−d_j) + 10^(−candidate)).

    The cash of the page's paths so far (10^(−d_j)) plus the cash the new link brings, back
    in distance units; computed from the smaller of the two so nothing overflows. An
    unknown page (d_j = ∞) takes the candidate itself (eq. 13). Two equal distances d give
    d − log10 2: two parents as good as one another halve the page's distance in cash.
    """
    if d_child == UNKNOWN:
        return candidate
    low, high = (d_child, candidate) if d_child <= candidate else (candidate, d_child)
    return low - math.log10(1.0 + 10.0 ** (low - high))


class IecaPlusDistance(NamedTuple):
    """IECA+ state of one URL: its distance (∞ unknown), the in-links that built it and
    the last cycle it was crawled in."""

    distance: float = UNKNOWN
    inlinks: int = 0
    crawled_cycle: int = NOT_CRAWLED

    def crawled_in(self, cycle: int) -> bool:
        return self.crawled_cycle >= cycle

    def after_link(
        self, d_parent: float, weight: float, cycle: int, delta: float
    ) -> IecaPlusDistance:
        """The state after a link from a parent at distance `d_parent` with link weight
        log10 O(i): the candidate (1 − δ)·d_i + log10 O(i) (eq. 13) joins the page's
        distance by `evidence_distance`. A page crawled in this cycle keeps its state
        (Algorithm 1, line 16)."""
        if self.crawled_cycle >= cycle:
            return self
        candidate = new_distance(d_parent, weight, delta)
        return IecaPlusDistance(
            evidence_distance(self.distance, candidate), self.inlinks + 1, self.crawled_cycle
        )


_STATE = struct.Struct("<dii")


def encode_ieca_plus(state: IecaPlusDistance) -> bytes:
    """16 bytes: little-endian float64 distance, int32 in-links, int32 last crawled cycle."""
    try:
        return _STATE.pack(state.distance, state.inlinks, state.crawled_cycle)
    except struct.error as exc:
        raise StateCodecError(f"cannot encode {state!r}: {exc}") from exc


def decode_ieca_plus(data: bytes) -> IecaPlusDistance:
    """The state in the 16 bytes of `encode_ieca_plus`; StateCodecError for anything else."""
    if len(data) != _STATE.size:
        raise StateCodecError(f"an IECA+ state needs {_STATE.size} bytes, got {len(data)}")
    distance, inlinks, cycle = _STATE.unpack(data)
    return IecaPlusDistance(distance, inlinks, cycle)
