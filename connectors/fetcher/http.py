"""One page over HTTP: the address guard, redirects, timeouts, the size cap, the type check.

`fetch_page` never raises for what a web server or the network does: every outcome is a
`PageOutcome` whose status is the HTTP code, or one of the negative codes below for a
transport problem, with a reason fit for a log line. Redirects on the same host are
followed after the host's politeness delay (up to `max_redirects`); a redirect to another
host ends the request with the 3xx status and the target as the page's only outlink, so
the frontier decides when that host is visited.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from frontierflow.connectors.fetcher.outcomes import (
    BAD_URL,
    BLOCKED_ADDRESS,
    DNS_ERROR,
    HOST_PROBLEMS,
    ROBOTS_DISALLOWED,
    STATUS_REASONS,
    TIMEOUT,
    TOO_LARGE,
    TOO_MANY_REDIRECTS,
    TRANSPORT_ERROR,
    PageOutcome,
)
from frontierflow.connectors.fetcher.settings import FetcherSettings
from frontierflow.connectors.htmlpages import HTML_TYPES
from frontierflow.state.hosts import PAUSE_STATUSES, parse_retry_after

__all__ = [
    "BAD_URL",
    "BLOCKED_ADDRESS",
    "DNS_ERROR",
    "HOST_PROBLEMS",
    "ROBOTS_DISALLOWED",
    "STATUS_REASONS",
    "TIMEOUT",
    "TOO_LARGE",
    "TOO_MANY_REDIRECTS",
    "TRANSPORT_ERROR",
    "PageOutcome",
    "fetch_page",
    "open_session",
    "url_problem",
]

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


class BlockedAddress(OSError):
    """Every address of the host is one the fetcher may not connect to."""


def address_allowed(address: str, allow_private: bool) -> bool:
    """Only globally routable addresses, unless private ones are allowed (tests, intranets)."""
    if allow_private:
        return True
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_global
    except ValueError:
        return False


class GuardedResolver(AbstractResolver):
    """The system resolver (in a thread), with curl-like overrides, keeping only the
    addresses `address_allowed` accepts."""

    def __init__(self, overrides: dict[tuple[str, int], str], allow_private: bool) -> None:
        self._overrides = overrides
        self._allow_private = allow_private
        self._system = aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        fixed = self._overrides.get((host.lower(), port))
        if fixed is not None:
            fam = socket.AF_INET6 if ":" in fixed else socket.AF_INET
            results: list[ResolveResult] = [
                {
                    "hostname": host,
                    "host": fixed,
                    "port": port,
                    "family": fam,
                    "proto": 0,
                    "flags": socket.AI_NUMERICHOST,
                }
            ]
        else:
            results = await self._system.resolve(host, port, family)
        allowed = [r for r in results if address_allowed(r["host"], self._allow_private)]
        if not allowed:
            raise BlockedAddress(f"{host} resolves only to non-public addresses")
        return allowed

    async def close(self) -> None:
        await self._system.close()


def open_session(settings: FetcherSettings) -> aiohttp.ClientSession:
    """One session for the fetcher's life: its connection pool, resolver and timeouts."""
    connector = aiohttp.TCPConnector(
        resolver=GuardedResolver(dict(settings.resolve), settings.allow_private),
        limit=0,
        ttl_dns_cache=300,
    )
    timeout = aiohttp.ClientTimeout(
        total=settings.read_timeout_s, sock_connect=settings.connect_timeout_s
    )
    return aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        headers={"User-Agent": settings.user_agent},
        cookie_jar=aiohttp.DummyCookieJar(),  # no cookies, no sessions
    )


def url_problem(url: str, allow_private: bool) -> tuple[int, str] | None:
    """Why `url` may not be requested at all (a status and a reason), or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError as exc:
        return BAD_URL, f"unparsable URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return BAD_URL, f"not an absolute http(s) URL: {url[:200]!r}"
    host = parts.hostname
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None  # a name: the resolver checks its addresses
    if not address_allowed(host, allow_private):
        return BLOCKED_ADDRESS, f"{host} is not a public address"
    return None


async def fetch_page(
    session: aiohttp.ClientSession,
    url: str,
    settings: FetcherSettings,
    rest: Callable[[], Awaitable[None]],
    accept: tuple[str, ...] | None = HTML_TYPES,
) -> PageOutcome:
    """GET `url` (see the module docstring). `rest` waits out the host's politeness delay
    before a same-host redirect is followed; `accept`: the content types whose body is read
    (None: any)."""
    started = time.perf_counter()

    def done(status: int, current: str, **kw: Any) -> PageOutcome:
        return PageOutcome(status, current, fetch_ms=(time.perf_counter() - started) * 1e3, **kw)

    current = url
    origin = urlsplit(url).netloc.lower()
    for hop in range(settings.max_redirects + 1):
        problem = url_problem(current, settings.allow_private)
        if problem is not None:
            return done(problem[0], current, reason=problem[1])
        if hop:
            await rest()
        try:
            async with session.get(current, allow_redirects=False) as response:
                status = response.status
                if status in _REDIRECTS and "Location" in response.headers:
                    target = urljoin(current, response.headers["Location"])
                    if urlsplit(target).netloc.lower() != origin:
                        return done(status, current, redirect_to=target, reason="off-host")
                    current = target
                    continue
                if status in PAUSE_STATUSES:
                    wait = parse_retry_after(
                        response.headers.get("Retry-After"), int(time.time() * 1000)
                    )
                    return done(status, current, retry_after_ms=wait, reason="pushed back")
                return await _read_body(response, status, current, settings, accept, done)
        except TimeoutError:
            return done(
                TIMEOUT, current, reason=f"no complete answer in {settings.read_timeout_s} s"
            )
        except aiohttp.ClientConnectorError as exc:
            os_error = exc.os_error
            if isinstance(os_error, BlockedAddress):
                return done(BLOCKED_ADDRESS, current, reason=str(os_error))
            if isinstance(exc, aiohttp.ClientConnectorDNSError):
                return done(DNS_ERROR, current, reason=f"cannot resolve: {os_error}")
            return done(TRANSPORT_ERROR, current, reason=f"cannot connect: {os_error}")
        except (aiohttp.ClientError, OSError) as exc:
            return done(TRANSPORT_ERROR, current, reason=f"{type(exc).__name__}: {exc}")
    return done(TOO_MANY_REDIRECTS, current, reason=f"more than {settings.max_redirects} redirects")


async def _read_body(
    response: aiohttp.ClientResponse,
    status: int,
    current: str,
    settings: FetcherSettings,
    accept: tuple[str, ...] | None,
    done: Callable[..., PageOutcome],
) -> PageOutcome:
    """The body of a final answer, when it is of an accepted type and within the cap."""
    length = response.content_length
    if length is not None and length > settings.max_bytes:
        return done(TOO_LARGE, current, reason=f"Content-Length {length} > {settings.max_bytes}")
    if accept is not None and response.content_type not in accept:
        return done(status, current, reason=f"content type {response.content_type!r} skipped")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(_CHUNK):
        size += len(chunk)
        if size > settings.max_bytes:
            return done(TOO_LARGE, current, size=size, reason=f"body > {settings.max_bytes} bytes")
        chunks.append(chunk)
    return done(status, current, body=b"".join(chunks), size=size)
