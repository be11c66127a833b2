"""Politeness and pushback per host: one state per (crawl, queue group) and one transition.

A server that answers `429 Too Many Requests` or `503 Service Unavailable` asks the
crawler to go away for a while; a run of server errors or broken connections says the
same without words. `host_after_fetch` is the one rule every path applies to what a
fetcher reports, in event order: the frontier's engines (in RocksDB, per crawl and queue
group) and the fetchers we ship (at once, on their own answers, so no request goes out
between an answer and the frontier's word on it). `HostState.next_allowed` is when the
group may be asked again; `HostState.exhausted` says its pages for this cycle are spent.

The rules (defaults of `HostPolicy`):

- 429 or 503 pause the group: for `Retry-After` when the server sent one (capped at
  24 h), else for an exponential back-off: 60 s at the first, doubling at each further
  one up to 24 h, times 1 ± 10 % jitter (the curve of Nutch's NUTCH-2946). The jitter is
  drawn from the group, the level and the answer's time, so a replay is repeatable.
- Other 5xx answers and transport failures (refused, reset, timed out, unresolvable)
  count in a run; `failure_run` of them in a row back off the same way.
- A 2xx resets the level and the run (an earlier pause still runs out as announced).
- Every download that is not deferred (a 429, a 503, a transport failure: the page is
  asked for again) counts as one page of its group in its crawl cycle; a later cycle
  starts the count again.
- A robots.txt Crawl-delay the fetcher saw becomes the group's delay between requests.

A client of the frontier may set a group's state directly (`set_by_client`: the URL
Frontier API's `BlockQueueUntil`, `SetDelay` and `SetCrawlLimit`): a block is a pause
with the reason "blocked", a delay replaces the robots.txt one until the next robots.txt
says otherwise, and a page limit of the group's own stands before the policy's.
"""

from __future__ import annotations

import email.utils
import math
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace

from frontierflow.schemas.records import FetchEvent
from frontierflow.state.storage.codec import StateCodecError
from frontierflow.state.traps import registered_domain

SECOND_MS = 1_000
DAY_MS = 86_400_000

PAUSE_STATUSES = frozenset({429, 503})
"""Answers that ask the crawler to come back later (with or without `Retry-After`)."""

TRANSPORT_FAILURES = frozenset({-1, -2, -3})
"""FetchEvent statuses of a request that never got an answer: transport error (refused,
reset, broken), timeout, DNS failure (connectors/fetcher/outcomes.py names them)."""

NO_REQUEST_STATUSES = frozenset({208, -4, -7, -8})
"""Statuses of a page answered without a request to its host: already fetched (208), a
refused address, robots.txt disallows it, not an http(s) URL. They do not count."""


@dataclass(frozen=True, slots=True)
class HostPolicy:
    """How the frontier treats a host that pushes back, and the page limits per cycle.

    Times in milliseconds. Validated once: a bad setting fails at start-up.
    """

    backoff_base_ms: int = 60 * SECOND_MS
    """The first back-off without `Retry-After` (Nutch: 60 s)."""
    backoff_max_ms: int = DAY_MS
    """The longest back-off, and the cap on a `Retry-After`."""
    jitter: float = 0.10
    """A back-off is multiplied by 1 + u·jitter, u uniform in [-1, 1)."""
    failure_run: int = 3
    """Server errors (5xx other than 503) or transport failures in a row that back off."""
    max_attempts: int = 3
    """Tries of one page that a fetcher makes before its last answer stands as the page's."""
    host_page_limit: int | None = None
    """Pages of one queue group per crawl cycle (None: no limit)."""
    domain_page_limit: int | None = None
    """Pages of one registered domain per crawl cycle (None: no limit)."""
    max_crawl_delay_ms: int = 60 * SECOND_MS
    """A robots.txt Crawl-delay longer than this is taken as this."""

    def __post_init__(self) -> None:
        if not 0 < self.backoff_base_ms <= self.backoff_max_ms:
            raise ValueError(
                f"need 0 < backoff_base_ms <= backoff_max_ms, got "
                f"{self.backoff_base_ms}, {self.backoff_max_ms}"
            )
        if not (math.isfinite(self.jitter) and 0 <= self.jitter < 1):
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter!r}")
        if self.failure_run < 1 or self.max_attempts < 1:
            raise ValueError("failure_run and max_attempts must be >= 1")
        for name in ("host_page_limit", "domain_page_limit"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 or None, got {value}")
        if self.max_crawl_delay_ms < 0:
            raise ValueError("max_crawl_delay_ms must be >= 0")


DEFAULT_POLICY = HostPolicy()


@dataclass(frozen=True, slots=True)
class HostReport:
    """What one answer says about its host: the fields of a FetchEvent the rule reads."""

    fetched_at: int
    status: int
    cycle: int = 0
    retry_after_ms: int | None = None
    crawl_delay_ms: int | None = None


@dataclass(frozen=True, slots=True)
class HostState:
    """One queue group of one crawl, as the frontier remembers it."""

    paused_until: int = 0
    """No request before this (epoch ms); 0: never paused."""
    delay_ms: int = 0
    """Between two requests (robots.txt Crawl-delay); 0: the fetcher's own delay."""
    level: int = 0
    """Back-offs in a row (0: none since the last 2xx)."""
    failures: int = 0
    """Server errors or transport failures in a row."""
    reason: str = ""
    """Why the last pause began: "429", "503", "5xx", "transport"; "" when none did."""
    cycle: int = 0
    pages: int = 0
    """Downloads of the group in `cycle`."""
    last_fetch_at: int = 0
    pauses: int = 0
    """Pauses begun, over the crawl (for reports)."""
    page_limit: int = 0
    """Pages of the group per crawl cycle, as a client set it; 0: the policy's limit."""

    def next_allowed(self) -> int:
        """When the group may be asked again (epoch ms)."""
        return max(self.paused_until, self.last_fetch_at + self.delay_ms)

    def paused(self, now_ms: int) -> bool:
        """Inside a pause the server announced or a back-off began."""
        return now_ms < self.paused_until

    def exhausted(self, limit: int | None, cycle: int) -> bool:
        """The group's pages for `cycle` are spent."""
        return limit is not None and cycle == self.cycle and self.pages >= limit


def jitter_factor(key: str, level: int, at_ms: int, jitter: float) -> float:
    """1 + u·jitter with u in [-1, 1) drawn from (key, level, at_ms): the same answer gives
    the same back-off on every path and in every replay."""
    if jitter == 0:
        return 1.0
    h = zlib.crc32(f"{key}\x00{level}\x00{at_ms}".encode())
    u = h / 2**31 - 1.0
    return 1.0 + jitter * u


def backoff_ms(level: int, key: str, at_ms: int, policy: HostPolicy = DEFAULT_POLICY) -> int:
    """The back-off at `level` (1 = first): base·2^(level−1), at most the cap, jittered,
    and never past the cap."""
    if level < 1:
        return 0
    exp = min(level - 1, 62)
    plain = min(policy.backoff_max_ms, policy.backoff_base_ms * (1 << exp))
    jittered = round(plain * jitter_factor(key, level, at_ms, policy.jitter))
    return min(policy.backoff_max_ms, jittered)


def is_deferred(status: int) -> bool:
    """An answer that says "not now": the fetcher asks again after the group's pause."""
    return status in PAUSE_STATUSES or status in TRANSPORT_FAILURES


def host_after_fetch(
    state: HostState | None,
    report: HostReport,
    key: str,
    policy: HostPolicy = DEFAULT_POLICY,
) -> HostState:
    """The group's state after one answer (see the module docstring); `key` names the
    group (crawl and queue group) for the jitter. One state is built per answer: this runs
    for every event the frontier reads."""
    s = state if state is not None else _NONE_YET
    status, at = report.status, report.fetched_at
    delay = s.delay_ms
    if report.crawl_delay_ms is not None and report.crawl_delay_ms >= 0:
        delay = min(report.crawl_delay_ms, policy.max_crawl_delay_ms)
    if status in NO_REQUEST_STATUSES:
        return s if delay == s.delay_ms else replace(s, delay_ms=delay)
    cycle, pages = _counted(s, report)
    level, failures, reason = s.level, s.failures, s.reason
    until, pauses = s.paused_until, s.pauses
    if 200 <= status < 300:
        level = failures = 0
    elif status in PAUSE_STATUSES:
        level, failures, reason, pauses = level + 1, 0, str(status), pauses + 1
        if report.retry_after_ms is not None and report.retry_after_ms >= 0:
            pause = min(report.retry_after_ms, policy.backoff_max_ms)
        else:
            pause = backoff_ms(level, key, at, policy)
        until = max(until, at + pause)
    elif status >= 500 or status in TRANSPORT_FAILURES:
        failures += 1
        if failures >= policy.failure_run:
            level, pauses = level + 1, pauses + 1
            reason = "5xx" if status >= 500 else "transport"
            until = max(until, at + backoff_ms(level, key, at, policy))
    # else 1xx, 3xx, 4xx other than 429, a too-large page: the page's own affair
    return HostState(
        paused_until=until,
        delay_ms=delay,
        level=level,
        failures=failures,
        reason=reason,
        cycle=cycle,
        pages=pages,
        last_fetch_at=max(s.last_fetch_at, at),
        pauses=pauses,
        page_limit=s.page_limit,
    )


def set_by_client(
    state: HostState | None,
    *,
    blocked_until_ms: int | None = None,
    delay_ms: int | None = None,
    page_limit: int | None = None,
) -> HostState:
    """The group's state after a client's word (each None: unchanged). A block replaces
    the pause, whatever began it (0 lifts it); a delay replaces the group's delay; a page
    limit of 0 hands the group back to the policy's."""
    s = state if state is not None else _NONE_YET
    if blocked_until_ms is not None:
        if blocked_until_ms < 0:
            raise ValueError(f"a block ends at an epoch time >= 0, got {blocked_until_ms}")
        s = replace(s, paused_until=blocked_until_ms, reason="blocked" if blocked_until_ms else "")
    if delay_ms is not None:
        if delay_ms < 0:
            raise ValueError(f"a delay is >= 0 ms, got {delay_ms}")
        s = replace(s, delay_ms=delay_ms)
    if page_limit is not None:
        if page_limit < 0:
            raise ValueError(f"a page limit is >= 0 (0: the policy's), got {page_limit}")
        s = replace(s, page_limit=page_limit)
    return s


_NONE_YET = HostState()


def _counted(s: HostState, report: HostReport) -> tuple[int, int]:
    """(cycle, pages) after one answer that reached the host: a later cycle starts the
    count again, an earlier one's answer does not count, a deferred answer is no page."""
    if report.cycle > s.cycle:
        return report.cycle, 0 if is_deferred(report.status) else 1
    if report.cycle < s.cycle or is_deferred(report.status):
        return s.cycle, s.pages
    return s.cycle, s.pages + 1


def count_page(state: HostState | None, report: HostReport) -> HostState:
    """A registered domain's page count after one answer: only `cycle` and `pages` of
    `host_after_fetch` (a domain is not paused for one of its hosts)."""
    s = state if state is not None else _NONE_YET
    if report.status in NO_REQUEST_STATUSES:
        return s
    cycle, pages = _counted(s, report)
    return s if (cycle, pages) == (s.cycle, s.pages) else replace(s, cycle=cycle, pages=pages)


HostStates = Callable[[str], "HostState | None"]
"""A state lookup by key (`group_key` or `domain_key`): where the caller keeps them."""


def answer_updates(
    states: HostStates,
    event: FetchEvent,
    policy: HostPolicy = DEFAULT_POLICY,
    group: str | None = None,
) -> list[tuple[str, HostState]]:
    """The (key, new state) pairs one FetchEvent makes: its queue group's (`group`, by
    default the event's host), through `host_after_fetch`, and its registered domain's
    page count when domains have a limit. The job and the fetchers call this one
    function."""
    report = HostReport(
        fetched_at=event.fetched_at,
        status=event.status,
        cycle=event.cycle,
        retry_after_ms=event.retry_after_ms,
        crawl_delay_ms=event.crawl_delay_ms,
    )
    key = group_key(event.crawl_id, event.host if group is None else group)
    out = [(key, host_after_fetch(states(key), report, key, policy))]
    if policy.domain_page_limit is not None:
        dkey = domain_key(event.crawl_id, registered_domain(event.host))
        out.append((dkey, count_page(states(dkey), report)))
    return out


def held_until(
    states: HostStates,
    crawl_id: str,
    host: str,
    cycle: int,
    now_ms: int,
    policy: HostPolicy = DEFAULT_POLICY,
    group: str | None = None,
) -> int | None:
    """None when `host` may be asked now for a page of `cycle`; else when it may (epoch
    ms: the end of its pause), or 0 when only a new cycle frees it (its pages, or its
    registered domain's, are spent). `group`: the host's queue group (by default the
    host itself; an IP address when hosts on one server share their politeness)."""
    state = states(group_key(crawl_id, host if group is None else group))
    if state is not None:
        if state.paused(now_ms):
            return state.paused_until
        if state.exhausted(state.page_limit or policy.host_page_limit, cycle):
            return 0
    if policy.domain_page_limit is not None:
        domain = states(domain_key(crawl_id, registered_domain(host)))
        if domain is not None and domain.exhausted(policy.domain_page_limit, cycle):
            return 0
    return None


def parse_retry_after(value: str | None, now_ms: int) -> int | None:
    """A `Retry-After` header as milliseconds from `now_ms` (RFC 9110 §10.2.3: a number of
    seconds, or an HTTP date); None when absent or unreadable; never negative."""
    if value is None:
        return None
    text = value.strip()
    if text.isdigit():
        return int(text) * SECOND_MS
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None or when.tzinfo is None:
        return None
    return max(0, int(when.timestamp() * 1000) - now_ms)


def group_key(crawl_id: str, group: str) -> str:
    """The state key of a queue group (a host, or an IP address) in a crawl."""
    return f"{crawl_id}\x00{group}"


def domain_key(crawl_id: str, domain: str) -> str:
    """The state key of a registered domain's page count in a crawl."""
    return f"{crawl_id}\x00@{domain}"


# --------------------------------------------------------------------------- encoding

_VERSION = 2
_LAYOUT = struct.Struct(">BqqIIIiIIIB")
_LAYOUT_V1 = struct.Struct(">BqqIIIiIIB")
"""Version 1 had no `page_limit` (read as 0)."""


def encode_host_state(s: HostState) -> bytes:
    """Big-endian fixed layout then the reason; `StateCodecError` for values out of it."""
    reason = s.reason.encode()
    try:
        return (
            _LAYOUT.pack(
                _VERSION,
                s.paused_until,
                s.last_fetch_at,
                s.delay_ms,
                s.level,
                s.failures,
                s.cycle,
                s.pages,
                s.pauses,
                s.page_limit,
                len(reason),
            )
            + reason
        )
    except struct.error as exc:
        raise StateCodecError(f"cannot encode a HostState: {exc}") from exc


def decode_host_state(raw: bytes) -> HostState:
    """`encode_host_state` back; `StateCodecError` for anything else."""
    version = raw[0] if raw else None
    if version == _VERSION:
        layout = _LAYOUT
    elif version == 1:
        layout = _LAYOUT_V1
    else:
        raise StateCodecError(f"HostState version {version} is not 1 or {_VERSION}")
    if len(raw) < layout.size:
        raise StateCodecError(f"HostState of {len(raw)} bytes is truncated")
    fields = layout.unpack_from(raw)
    (_, paused, last, delay, level, failures, cycle, pages, pauses) = fields[:9]
    page_limit = fields[9] if layout is _LAYOUT else 0
    n = fields[-1]
    if len(raw) != layout.size + n:
        raise StateCodecError("HostState reason length does not match")
    return HostState(
        paused_until=paused,
        delay_ms=delay,
        level=level,
        failures=failures,
        reason=raw[layout.size :].decode(),
        cycle=cycle,
        pages=pages,
        last_fetch_at=last,
        pauses=pauses,
        page_limit=page_limit,
    )
