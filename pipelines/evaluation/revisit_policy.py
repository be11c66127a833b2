"""The revisit policies the news-site simulation compares, and the learned policies'
constants besides the per-page record's (`state.revisits.RevisitSettings`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from frontierflow.state.revisits import HOUR_MS, RevisitSettings


class Policy(Enum):
    FIXED = "fixed"
    TOPIC_SECTIONS = "topic-sections"
    """The fixed schedule without the home page: the topic's section pages only."""
    SEED_ONLY = "seed-only"
    PROPORTIONAL = "proportional"
    OPTIMAL_FRESHNESS = "optimal-freshness"
    DISCOVERY = "discovery"
    LIVE = "live"
    """The live job's `--revisit learned` rule (`revisit_live_rule`): its own constants (in
    `state.revisit_schedule`, chosen on the same tuning windows, not by `--tune`); a page is
    taken when its revisit is due, as a fetcher honours `not_before`, so it may make fewer
    downloads."""
    FLEET = "fleet"
    """The weblog forager fleet (`revisit_fleet`), not a revisit policy: beside them."""
    FLEET_LEARNED = "fleet-learned"
    """The same fleet, its paths started on the discovery rule's schedule."""

    @property
    def learns(self) -> bool:
        """Whether the policy chooses from estimates with the simulation's constants (else
        it follows a list, or the live job's rule)."""
        return self not in (
            Policy.FIXED, Policy.TOPIC_SECTIONS, Policy.SEED_ONLY, Policy.LIVE, Policy.FLEET
        )  # fmt: skip

    @property
    def has_list(self) -> bool:
        """Whether the policy starts from its own list of pages (not from a seed)."""
        return self in (Policy.FIXED, Policy.TOPIC_SECTIONS)

    @property
    def is_fleet(self) -> bool:
        return self in (Policy.FLEET, Policy.FLEET_LEARNED)


REVISIT_POLICIES = tuple(p for p in Policy if not p.is_fleet and p is not Policy.LIVE)
"""What `frontierflow simulate revisits` runs unless told otherwise (the live rule, which
may make fewer downloads, and the fleets when asked for)."""


@dataclass(frozen=True, slots=True)
class RevisitPolicySettings:
    """The learned policies' constants besides the per-page record's (all ours)."""

    revisit: RevisitSettings = field(default_factory=RevisitSettings)
    exploration: float = 0.05
    """At most this share of the downloads goes to probes and the links they bring."""
    plan_ms: int = HOUR_MS
    """Frequencies are worked out again this often."""
    skip_below: float = 0.0
    """A link a revisit shows waits until no revisit is due when links of its kind were
    rewarded less often than this (`revisit_links.LinkOdds`); 0: no link waits."""
    stale_ms: int = 0
    """A link a revisit shows that the crawl first saw more than this long ago is not
    fetched (a story listed that long is at least that old); 0: every link is."""
    worth_ms: int = 0
    """The discovery rule's allocation: 0, in proportion to the square root of each page's
    rate of stories (`square_root_frequencies`); above 0, the most stories found given how
    long each page keeps them listed, a story found d late worth e^(−d/worth_ms)
    (`listing_frequencies`)."""
    floor_ms: int = 0
    """With `worth_ms`: a page that lists links (no publication time) worth a download on
    average (their odds at least `skip_below`) is revisited at least once per the mean stay
    of a link on it or per `floor_ms` if shorter (`PageListings.floors`); 0: no floor."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.exploration < 1.0:
            raise ValueError(f"exploration must be in [0, 1), got {self.exploration}")
        if self.plan_ms < 1:
            raise ValueError(f"plan_ms must be >= 1, got {self.plan_ms}")
        if not 0.0 <= self.skip_below < 1.0:
            raise ValueError(f"skip_below must be in [0, 1), got {self.skip_below}")
        if self.stale_ms < 0 or self.worth_ms < 0 or self.floor_ms < 0:
            raise ValueError("stale_ms, worth_ms and floor_ms must be >= 0")
