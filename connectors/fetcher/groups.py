"""Queue groups by server address: hosts that resolve to one IP address share one
politeness unit (`queue.HostQueues`'s `group_of`), so a crawl asks a server that hosts
many names (a shared host, a CDN edge, a blog farm) one request at a time, not one per
name.

`AddressGroups.warm` resolves names off the event loop (the fetcher's reader thread calls
it for the URLs it reads, before they are queued); `AddressGroups.__call__` only looks
the answer up, and a name not (yet) resolved, or that does not resolve, is its own group.
A fixed address given with `--resolve HOST:PORT:ADDR` is used as it is.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from frontierflow.schemas.records import FetchEvent, split_frontier_key
from frontierflow.state.traps import url_netloc

log = logging.getLogger(__name__)

Lookup = Callable[[str], str | None]


def system_lookup(host: str) -> str | None:
    """The first address the system resolver gives `host`, or None."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as exc:
        log.info("%s does not resolve (%s): its own queue group", host, exc)
        return None
    return str(infos[0][4][0]) if infos else None


def split_netloc(netloc: str) -> tuple[str, int | None]:
    """(host, port or None) of a lower-case `host[:port]` (IPv6 in brackets)."""
    if netloc.startswith("["):
        host, _, rest = netloc[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    host, sep, port = netloc.rpartition(":")
    if sep and port.isdigit():
        return host, int(port)
    return netloc, None


class AddressGroups:
    """host:port → the address its host resolves to (see the module docstring)."""

    def __init__(
        self,
        fixed: Mapping[tuple[str, int], str] | None = None,
        lookup: Lookup = system_lookup,
        fixed_hosts: Mapping[str, str] | None = None,
    ) -> None:
        self._fixed = dict(fixed or {})
        self._fixed_hosts = dict(fixed_hosts or {})
        """host → address, whatever the port (Scrapy's resolver's form)."""
        self._lookup = lookup
        self._groups: dict[str, str] = {}

    def warm_records(self, records: Iterable[tuple[Any, Any, bytes | None, Any]]) -> None:
        """`warm` for the hosts of frontier records ((partition, offset, key, value)s: the
        key names the URL)."""
        keys = (split_frontier_key(k.decode("utf-8", "replace")) for _, _, k, _ in records if k)
        self.warm(url_netloc(k if isinstance(k, str) else k[0]) for k in keys)

    def warm_pages(self, pages: Iterable[FetchEvent]) -> None:
        """`warm` for the hosts of downloads read back from the `fetched` topic."""
        self.warm(url_netloc(e.url) for e in pages)

    def warm(self, netlocs: Iterable[str]) -> None:
        """Resolve the names not resolved yet (blocking: not on the event loop)."""
        for netloc in netlocs:
            if netloc and netloc not in self._groups:
                self._groups[netloc] = self._resolve(netloc)

    def __call__(self, netloc: str) -> str:
        group = self._groups.get(netloc)
        if group is None:
            fixed = self._fixed_address(netloc)
            return netloc if fixed is None else fixed
        return group

    def _fixed_address(self, netloc: str) -> str | None:
        host, port = split_netloc(netloc)
        ports = (port,) if port is not None else (80, 443)
        for p in ports:
            addr = self._fixed.get((host, p))
            if addr is not None:
                return addr
        return self._fixed_hosts.get(host)

    def _resolve(self, netloc: str) -> str:
        fixed = self._fixed_address(netloc)
        if fixed is not None:
            return fixed
        host, _ = split_netloc(netloc)
        found = self._lookup(host)
        return netloc if found is None else found
