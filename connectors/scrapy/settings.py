"""The `FRONTIERFLOW_*` settings of a Scrapy project, read and validated once."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from frontierflow.connectors.fetcher.queue import SPENDS, Spend
from frontierflow.connectors.fetcher.settings import GROUP_BYS, GroupBy, parse_resolve
from frontierflow.connectors.kafka import KafkaSettings, KafkaTopics
from frontierflow.connectors.kafka_client import KAFKA_CLIENTS
from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy
from frontierflow.state.traps import DEFAULT_LINK_LIMITS, LINK_LIMIT_NAMES, LinkLimits

DEFAULT_GROUP_ID = "frontierflow-fetchers"
"""The consumer group `frontierflow fetch` uses too: Scrapy processes and reference
fetchers on one frontier split its partitions between them."""


@dataclass(frozen=True, slots=True)
class ScrapyFrontierSettings:
    """What the scheduler and the middleware need; `from_scrapy` reads them."""

    kafka: KafkaSettings
    fetcher_id: str
    max_pages: int | None = None
    """The scheduler's budget: requests handed to Scrapy (retries of one entry count once);
    then it waits for the answers and lets the spider close."""
    idle_exit_s: float | None = None
    """Let the spider close when nothing was queued or in flight for this long (None: wait
    for the frontier until the spider is stopped)."""
    min_concurrency: int = 1
    max_concurrency: int = 64
    """A ScalingDecision's thread count is kept within these before it becomes Scrapy's
    total concurrency."""
    follow_hosts: frozenset[str] | None = None
    resolve: Mapping[str, str] = field(default_factory=dict)
    hosts: HostPolicy = DEFAULT_POLICY
    """The frontier's rule for hosts that push back (FRONTIERFLOW_HOST_PAGE_LIMIT,
    FRONTIERFLOW_DOMAIN_PAGE_LIMIT, FRONTIERFLOW_MAX_ATTEMPTS; the rest at its defaults)."""
    spend: Spend = "pages"
    """FRONTIERFLOW_SPEND: "pages" or "time" (the reference fetcher's `--spend`)."""
    group_by: GroupBy = "host"
    """FRONTIERFLOW_GROUP_BY: "host", or "ip" (hosts on one server address share one
    request at a time and one host state; the reference fetcher's `--group-by`)."""
    max_lead: int | None = None
    """FRONTIERFLOW_MAX_LEAD: downloads not yet read by the frontier before the next
    request waits (the reference fetcher's `--max-lead`); none by default."""
    links: LinkLimits = DEFAULT_LINK_LIMITS
    """Outlinks not followed (FRONTIERFLOW_MAX_PATTERN_DEPTH: a page this deep in a chain of
    its own URL pattern keeps none of its links of that pattern; FRONTIERFLOW_MAX_URL_CHARS,
    FRONTIERFLOW_MAX_PATH_SEGMENTS, FRONTIERFLOW_MAX_SEGMENT_REPEATS: the trap shapes; 0:
    no limit)."""

    def __post_init__(self) -> None:
        if not self.fetcher_id:
            raise ValueError("FRONTIERFLOW_FETCHER_ID is required")
        if self.max_pages is not None and self.max_pages < 1:
            raise ValueError(f"FRONTIERFLOW_MAX_PAGES must be >= 1, got {self.max_pages}")
        if self.idle_exit_s is not None and not (
            math.isfinite(self.idle_exit_s) and self.idle_exit_s > 0
        ):
            raise ValueError(f"FRONTIERFLOW_IDLE_EXIT must be > 0, got {self.idle_exit_s}")
        if self.spend not in SPENDS:
            raise ValueError(f"FRONTIERFLOW_SPEND is one of {SPENDS}, got {self.spend!r}")
        if self.group_by not in GROUP_BYS:
            raise ValueError(f"FRONTIERFLOW_GROUP_BY is one of {GROUP_BYS}, got {self.group_by!r}")
        if not 1 <= self.min_concurrency <= self.max_concurrency:
            raise ValueError(
                "need 1 <= FRONTIERFLOW_MIN_CONCURRENCY <= FRONTIERFLOW_MAX_CONCURRENCY, got "
                f"{self.min_concurrency}, {self.max_concurrency}"
            )

    def clamp_concurrency(self, threads: int) -> int:
        return max(self.min_concurrency, min(self.max_concurrency, threads))

    @classmethod
    def from_scrapy(cls, settings: Any) -> ScrapyFrontierSettings:
        """From a Scrapy `Settings` (anything with `get`, `getint`, `getfloat`, `getdict`,
        `getlist`). ValueError names the setting that is wrong."""
        bootstrap = settings.get("FRONTIERFLOW_BOOTSTRAP_SERVERS")
        if not bootstrap:
            raise ValueError("FRONTIERFLOW_BOOTSTRAP_SERVERS is required (HOST:PORT[,…])")
        topics = dict(settings.getdict("FRONTIERFLOW_TOPICS"))
        known = set(KafkaTopics.__dataclass_fields__)
        if set(topics) - known:
            raise ValueError(
                f"FRONTIERFLOW_TOPICS: unknown topics {sorted(set(topics) - known)}; "
                f"known: {sorted(known)}"
            )
        library = str(settings.get("FRONTIERFLOW_KAFKA_CLIENT") or "auto")
        if library not in KAFKA_CLIENTS:
            raise ValueError(
                f"FRONTIERFLOW_KAFKA_CLIENT is one of {', '.join(KAFKA_CLIENTS)}, got {library!r}"
            )
        kafka = KafkaSettings(
            bootstrap_servers=str(bootstrap),
            topics=KafkaTopics(**topics),
            client=dict(settings.getdict("FRONTIERFLOW_KAFKA")),
            group_id=settings.get("FRONTIERFLOW_GROUP_ID") or DEFAULT_GROUP_ID,
            client_library=library,
        )
        max_pages = settings.getint("FRONTIERFLOW_MAX_PAGES", 0) or None
        idle = settings.getfloat("FRONTIERFLOW_IDLE_EXIT", 0.0) or None
        follow = [h.strip().lower() for h in settings.getlist("FRONTIERFLOW_FOLLOW_HOSTS")]
        return cls(
            kafka=kafka,
            fetcher_id=str(settings.get("FRONTIERFLOW_FETCHER_ID") or ""),
            max_pages=max_pages,
            idle_exit_s=idle,
            min_concurrency=settings.getint("FRONTIERFLOW_MIN_CONCURRENCY", 1),
            max_concurrency=settings.getint("FRONTIERFLOW_MAX_CONCURRENCY", 64),
            follow_hosts=frozenset(h for h in follow if h) or None,
            resolve=parse_host_addresses(settings.getlist("FRONTIERFLOW_RESOLVE")),
            hosts=HostPolicy(
                host_page_limit=settings.getint("FRONTIERFLOW_HOST_PAGE_LIMIT", 0) or None,
                domain_page_limit=settings.getint("FRONTIERFLOW_DOMAIN_PAGE_LIMIT", 0) or None,
                max_attempts=settings.getint(
                    "FRONTIERFLOW_MAX_ATTEMPTS", DEFAULT_POLICY.max_attempts
                ),
            ),
            spend=settings.get("FRONTIERFLOW_SPEND") or "pages",
            max_lead=settings.getint("FRONTIERFLOW_MAX_LEAD", 0) or None,
            group_by=settings.get("FRONTIERFLOW_GROUP_BY") or "host",
            links=LinkLimits(
                **{
                    name: settings.getint(
                        f"FRONTIERFLOW_{name.upper()}", getattr(DEFAULT_LINK_LIMITS, name)
                    )
                    for name in LINK_LIMIT_NAMES
                }
            ),
        )


def parse_host_addresses(values: list[str]) -> dict[str, str]:
    """`HOST:PORT:ADDR` (the reference fetcher's `--resolve`, curl's form) as host → address
    for Scrapy's resolver, which resolves names without their port."""
    return {host: addr for (host, _port), addr in parse_resolve(values).items()}
