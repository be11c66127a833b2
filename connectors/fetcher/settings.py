"""What the reference fetcher may do, validated once at start-up."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from frontierflow.connectors.fetcher.queue import SPENDS, Spend
from frontierflow.state.hosts import DEFAULT_POLICY, HostPolicy
from frontierflow.state.traps import DEFAULT_LINK_LIMITS, LinkLimits

DEFAULT_USER_AGENT = "frontierflow-fetcher/0.1"


GroupBy = Literal["host", "ip"]
GROUP_BYS: tuple[GroupBy, ...] = ("host", "ip")


def parse_resolve(values: Sequence[str]) -> dict[tuple[str, int], str]:
    """curl's `--resolve HOST:PORT:ADDR` as (host, port) → address (IPv6 addresses may be
    bracketed). ValueError for anything else."""
    out: dict[tuple[str, int], str] = {}
    for value in values:
        host, sep1, rest = value.partition(":")
        port, sep2, addr = rest.partition(":")
        if not (sep1 and sep2 and host and port.isdigit() and addr):
            raise ValueError(f"--resolve takes HOST:PORT:ADDR, got {value!r}")
        addr = addr.strip("[]")
        try:
            ipaddress.ip_address(addr)
        except ValueError:
            raise ValueError(f"--resolve {value!r}: {addr!r} is not an IP address") from None
        out[(host.lower(), int(port))] = addr
    return out


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    """The fetcher's limits and manners. Times in seconds, sizes in bytes."""

    fetcher_id: str
    delay_s: float = 1.0
    """Politeness: at least this long between the end of one request to a host and the
    start of the next (a robots.txt Crawl-delay that is longer wins)."""
    connect_timeout_s: float = 10.0
    read_timeout_s: float = 30.0
    """The whole request, headers and body, must finish within this."""
    max_bytes: int = 5 * 1024 * 1024
    """Bodies larger than this are not read: status `TOO_LARGE`."""
    max_redirects: int = 5
    allow_private: bool = False
    """Fetch from loopback, private, link-local and other non-global addresses (tests)."""
    resolve: Mapping[tuple[str, int], str] = field(default_factory=dict)
    """(host, port) → address, used instead of the system resolver (curl's --resolve)."""
    user_agent: str = DEFAULT_USER_AGENT
    robots: bool = True
    workers: int = 4
    """Concurrent fetches at start; ScalingDecisions for this fetcher id change it."""
    min_workers: int = 1
    max_workers: int = 32
    max_pages: int | None = None
    """Stop after this many downloads (answers without a download do not count)."""
    follow_hosts: frozenset[str] | None = None
    """Keep only outlinks on these hosts (host or host:port); None: every http(s) link."""
    idle_exit_s: float | None = None
    """Stop when nothing was queued or in flight for this long (None: wait for more)."""
    hosts: HostPolicy = DEFAULT_POLICY
    """The frontier's rule for hosts that push back, and the page limits per cycle."""
    spend: Spend = "pages"
    """How a free worker chooses: "pages" never takes a worse entry while a better one
    waits only for its host's delay; "time" takes the best of any rested host."""
    links: LinkLimits = DEFAULT_LINK_LIMITS
    """Outlinks not followed: trap shapes, and links too deep in a chain of one pattern."""
    group_by: GroupBy = "host"
    """The politeness unit: each "host" (host:port), or each server "ip" address (the
    hosts that resolve to one address share one request at a time, one delay and one
    host state)."""
    max_lead: int | None = None
    """Downloads in flight or not yet read by the frontier before the next entry waits
    (`queue.HostQueues`); None: no bound."""

    def __post_init__(self) -> None:
        if not self.fetcher_id:
            raise ValueError("a fetcher id is required")
        for name in ("delay_s", "connect_timeout_s", "read_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
        if self.connect_timeout_s == 0 or self.read_timeout_s == 0:
            raise ValueError("timeouts must be > 0")
        if self.max_bytes < 1 or self.max_redirects < 0:
            raise ValueError("max_bytes must be >= 1 and max_redirects >= 0")
        if not 1 <= self.min_workers <= self.workers <= self.max_workers:
            raise ValueError(
                f"need 1 <= min_workers <= workers <= max_workers, got "
                f"{self.min_workers}, {self.workers}, {self.max_workers}"
            )
        if self.max_pages is not None and self.max_pages < 1:
            raise ValueError(f"max_pages must be >= 1, got {self.max_pages}")
        if self.idle_exit_s is not None and not self.idle_exit_s > 0:
            raise ValueError(f"idle_exit_s must be > 0, got {self.idle_exit_s}")
        if self.spend not in SPENDS:
            raise ValueError(f"spend is one of {SPENDS}, got {self.spend!r}")
        if self.group_by not in GROUP_BYS:
            raise ValueError(f"group_by is one of {GROUP_BYS}, got {self.group_by!r}")
        if self.max_lead is not None and self.max_lead < 1:
            raise ValueError(f"max_lead must be >= 1, got {self.max_lead}")

    def clamp_workers(self, threads: int) -> int:
        """A ScalingDecision's thread count, kept within [min_workers, max_workers]."""
        return max(self.min_workers, min(self.max_workers, threads))
