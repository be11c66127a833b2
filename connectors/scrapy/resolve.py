"""Scrapy's caching resolver with fixed addresses for some host names
(`FRONTIERFLOW_RESOLVE = ["HOST:PORT:ADDR", …]`, the reference fetcher's `--resolve`): for a
crawl of hosts that DNS does not know, such as virtual hosts served on loopback. Set
`DNS_RESOLVER = "frontierflow.connectors.scrapy.resolve.FixedAddressResolver"`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scrapy.resolver import CachingThreadedResolver
from twisted.internet import defer

from frontierflow.connectors.scrapy.settings import parse_host_addresses


class FixedAddressResolver(CachingThreadedResolver):
    def __init__(
        self, reactor: Any, cache_size: int, timeout: float, fixed: Mapping[str, str]
    ) -> None:
        super().__init__(reactor, cache_size, timeout)
        self.fixed = {host.lower(): addr for host, addr in fixed.items()}

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> FixedAddressResolver:
        settings = crawler.settings
        cache_size = settings.getint("DNSCACHE_SIZE") if settings.getbool("DNSCACHE_ENABLED") else 0
        fixed = parse_host_addresses(settings.getlist("FRONTIERFLOW_RESOLVE"))
        return cls(reactor, cache_size, settings.getfloat("DNS_TIMEOUT"), fixed)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        addr = self.fixed.get(name.lower())
        if addr is not None:
            return defer.succeed(addr)
        return super().getHostByName(name, timeout)
