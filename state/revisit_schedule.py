"""When a live crawl asks for a page again: the `--revisit` policy, what is kept per page and
per host to schedule revisits, and the pure rules every engine applies.

After each successful download of a page — its first fetch or a revisit — the job emits the
page's URL again with `not_before` set to its next visit:

- `fixed:INTERVAL`: the download's `fetched_at` + INTERVAL;
- `learned[:EVERY]`: from the page's record (`state.revisits.PageRevisits`: visits, visits
  that saw another version of the page, the last change seen). The version is the page's
  set of outlinks (a hub page changes when it shows other links), else its `content_hash`.
  Until the change rate can be estimated (Cho & Garcia-Molina 2003, TOIT: `change_rate`),
  or while the estimate is 0, the page is probed at doubling intervals while it stays
  unchanged (`probe_due_ms`). A page with a rate λ > 0 gets a share of its host's budget
  of revisits, in proportion to √λ: the square-root rule of
  `state.revisit_budget.square_root_frequencies` with a page's yield taken as its change
  rate (ours: a change of a hub page is new links shown), due `due_ms(last visit, f)`,
  never later than `probe_max_ms` after it.

The budget is kept per host, not for the whole crawl, so that it streams. A crawl-wide
budget B shared by all pages, f_i = B·√λ_i / Σ_j √λ_j, needs at every visit the sum over
every page of the crawl: one global quantity that each visit changes and each schedule
reads, which on a distributed runner is either one key holding the whole crawl or a side
input recomputed behind the stream. Per host, the sum is the host's own: the host is a
key the job keeps already (its politeness and pauses), and what a host can be asked is
bounded by its politeness anyway. So the budget is one revisit per EVERY per host (at most
one per the host's reported crawl delay), and the pages with a rate of a crawl over H hosts
share about H of them per EVERY (probes, which need no estimate, come on top). The host
keeps Σ √λ of its pages as a running total, changed by a page's own visits (a page's
weight changes only there), and each page's next visit is worked out at its visit from the
total as it stands then: a streaming form of the rule, exact for a host whose other pages'
rates did not move since.

A revisit is answered once: each revisit entry carries its due time in its echo
(`schemas.records.REVISIT_ECHO`), and the page's record keeps the due of the last revisit
answered, so a fetch answering it again (a fetcher restarted between its download and the
job's word) is a repeat.
"""

from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Final, NamedTuple

from frontierflow.schemas.records import ALREADY_FETCHED, FetchEvent
from frontierflow.state.revisit_budget import due_ms
from frontierflow.state.revisits import (
    DAY_MS,
    HOUR_MS,
    PageRevisits,
    RevisitSettings,
    change_rate,
    content_fingerprint,
    decode_page_revisits,
    encode_page_revisits,
    first_visit,
    outlink_fingerprint,
    probe_due_ms,
    record_visit,
)
from frontierflow.state.storage.codec import StateCodecError

REVISITS_FAMILY: Final = "revisits"
"""URL → its `PageSchedule`; `HOST_PREFIX` + `state.hosts.group_key` → a `HostRevisits`."""
HOST_PREFIX: Final = "\x00"
"""Keys of host revisit states (a URL never starts with a zero byte)."""

_UNITS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_INTERVAL = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)?")
DEFAULT_EVERY_MS: Final = 60_000
"""`learned` without EVERY: one revisit a minute per host."""
LIVE_SETTINGS: Final = RevisitSettings(
    half_life_ms=None, min_revisits=2, probe_ms=HOUR_MS, probe_max_ms=7 * DAY_MS
)
"""The page record's settings a live crawl uses (stated here, so that the offline
evaluation's tuning of its defaults does not move a running crawl's schedule): every visit
at full weight, estimates after two revisits, probes between an hour and a week apart."""


class RevisitMode(Enum):
    FIXED = "fixed"
    LEARNED = "learned"


@dataclass(frozen=True, slots=True)
class RevisitPolicy:
    """How the job schedules revisits (`parse_revisit`); validated once."""

    mode: RevisitMode
    interval_ms: int = 0
    """fixed: the wait after each download."""
    every_ms: int = DEFAULT_EVERY_MS
    """learned: the budget, one revisit per `every_ms` per host."""
    settings: RevisitSettings = field(default_factory=lambda: LIVE_SETTINGS)
    """learned: when a page's estimates are trusted and how it is probed until then."""

    def __post_init__(self) -> None:
        if self.mode is RevisitMode.FIXED and self.interval_ms < 1:
            raise ValueError(f"a fixed revisit interval must be >= 1 ms, got {self.interval_ms}")
        if self.every_ms < 1:
            raise ValueError(f"the revisit budget must be one per >= 1 ms, got {self.every_ms}")


def parse_interval_ms(text: str) -> int:
    """`90s`, `15m`, `2h`, `1d`, `500ms` or a number of seconds, in ms; ValueError else."""
    match = _INTERVAL.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an interval (90s, 15m, 2h, 1d, 500ms): {text!r}")
    return round(float(match.group(1)) * _UNITS[match.group(2) or "s"])


def parse_revisit(text: str) -> RevisitPolicy | None:
    """`--revisit`'s value: `none` (None), `fixed:INTERVAL` or `learned[:EVERY]`."""
    name, _, arg = text.strip().partition(":")
    if name == "none" and not arg:
        return None
    if name == RevisitMode.FIXED.value and arg:
        return RevisitPolicy(RevisitMode.FIXED, interval_ms=parse_interval_ms(arg))
    if name == RevisitMode.LEARNED.value:
        every = parse_interval_ms(arg) if arg else DEFAULT_EVERY_MS
        return RevisitPolicy(RevisitMode.LEARNED, every_ms=every)
    raise ValueError(f"--revisit is none, fixed:INTERVAL or learned[:EVERY], got {text!r}")


@dataclass(frozen=True, slots=True)
class PageSchedule:
    """What the job keeps per URL to schedule its revisits."""

    answered_ms: int = 0
    """The due time of the last revisit of the page that was answered (0: none yet)."""
    page: PageRevisits | None = None
    """learned: the page's visits and changes (None until its first successful download)."""
    weight: float = 0.0
    """learned: √λ, what the page counts in its host's total (0 without an estimate)."""


@dataclass(frozen=True, slots=True)
class HostRevisits:
    """What the job keeps per host (queue group) to share its budget of revisits."""

    weight: float = 0.0
    """Σ √λ over the host's pages with a change-rate estimate."""
    delay_ms: int = 0
    """The host's crawl delay as its fetcher last reported it (0: none)."""


class Visit(NamedTuple):
    """A page answer as the host's step schedules it (primitives only: it crosses Beam
    stages as a plain tuple)."""

    url: str
    host: str
    crawl_id: str
    cycle: int
    at_ms: int
    echo: dict[str, str]
    success: bool
    delta: float
    """The page's change of weight at this answer."""
    weight: float
    last_visit_ms: int
    due_alone_ms: int
    """The due time that needs no share of the host's budget (fixed, or a probe); −1 when
    the page takes its share."""
    delay_ms: int
    """The crawl delay the answer reported; −1 when it said none."""


def is_success(status: int) -> bool:
    """A download that shows the page: 2xx, an answer without a download (208) aside."""
    return 200 <= status < 300 and status != ALREADY_FETCHED


def version_of(event: FetchEvent) -> int:
    """The page's version: its set of outlinks, else its content hash (0: neither known)."""
    if event.outlinks:
        return outlink_fingerprint(event.outlinks)
    if event.content_hash:
        return content_fingerprint(event.content_hash.encode())
    return 0


def visit_page(
    record: PageSchedule | None, event: FetchEvent, answered_ms: int | None, policy: RevisitPolicy
) -> tuple[PageSchedule, Visit]:
    """The page's record after an answer that takes effect (a first fetch, or a revisit
    answered for the first time: `answered_ms` its due), and the visit its host schedules."""
    before = record if record is not None else PageSchedule()
    answered = before.answered_ms if answered_ms is None else answered_ms
    success = is_success(event.status)
    at = event.fetched_at
    page, weight, due_alone = before.page, 0.0, -1
    if policy.mode is RevisitMode.FIXED:
        due_alone = at + policy.interval_ms
    elif success:
        version = version_of(event)
        if page is None:
            page = first_visit(at, version)
        else:  # a download timed before the last visit (clocks of two fetchers) counts at it
            page = record_visit(page, max(at, page.last_visit_ms), version, 0, policy.settings)
        rate = change_rate(page, policy.settings)
        if rate is not None and rate > 0:
            weight = math.sqrt(rate)
        else:
            due_alone = probe_due_ms(page, policy.settings)
    after = PageSchedule(answered, page, weight)
    delay = -1 if event.crawl_delay_ms is None else event.crawl_delay_ms
    last = at if page is None else page.last_visit_ms
    visit = Visit(
        event.url, event.host, event.crawl_id, event.cycle, at, event.echo, success,
        weight - before.weight, weight, last, due_alone, delay,
    )  # fmt: skip
    return after, visit


def host_due(
    host: HostRevisits | None, visit: Visit, policy: RevisitPolicy
) -> tuple[int | None, HostRevisits]:
    """When the visited page is next due (None: not again, the answer was no download) and
    the host's state after the visit: its total weight moved by the page's change, the page's
    share of the host's budget b (one per `every_ms`, at most one per crawl delay) is
    f = b·w / total, due `due_ms(last visit, f)`, at most `probe_max_ms` after it."""
    before = host if host is not None else HostRevisits()
    delay = before.delay_ms if visit.delay_ms < 0 else visit.delay_ms
    after = HostRevisits(max(0.0, before.weight + visit.delta), delay)
    if not visit.success:
        return None, after
    if visit.due_alone_ms >= 0:
        return visit.due_alone_ms, after
    budget = 1.0 / max(policy.every_ms, delay)
    frequency = budget * visit.weight / max(after.weight, visit.weight)
    due = due_ms(visit.last_visit_ms, frequency)
    latest = visit.last_visit_ms + policy.settings.probe_max_ms
    return latest if due is None else min(due, latest), after


# --------------------------------------------------------------------------- encodings

_VERSION = 1
_PAGE = struct.Struct(">BqdB")
"""version, answered, weight, whether a `PageRevisits` (73 bytes) follows."""
_HOST = struct.Struct(">Bdq")
"""version, total weight, crawl delay."""


def encode_page_schedule(record: PageSchedule) -> bytes:
    """The layout above; `StateCodecError` for values out of it."""
    try:
        head = _PAGE.pack(_VERSION, record.answered_ms, record.weight, record.page is not None)
    except struct.error as exc:
        raise StateCodecError(f"cannot encode {record!r}: {exc}") from exc
    return head if record.page is None else head + encode_page_revisits(record.page)


def decode_page_schedule(data: bytes) -> PageSchedule:
    """`encode_page_schedule` back; `StateCodecError` for anything else."""
    if len(data) < _PAGE.size:
        raise StateCodecError(f"a page schedule is at least {_PAGE.size} bytes, got {len(data)}")
    version, answered, weight, has_page = _PAGE.unpack_from(data)
    if version != _VERSION:
        raise StateCodecError(f"page schedule version {version} is not {_VERSION}")
    rest = data[_PAGE.size :]
    if bool(has_page) != bool(rest) or has_page > 1:
        raise StateCodecError("a page schedule's record flag does not match its length")
    return PageSchedule(answered, decode_page_revisits(rest) if has_page else None, weight)


def encode_host_revisits(host: HostRevisits) -> bytes:
    try:
        return _HOST.pack(_VERSION, host.weight, host.delay_ms)
    except struct.error as exc:
        raise StateCodecError(f"cannot encode {host!r}: {exc}") from exc


def decode_host_revisits(data: bytes) -> HostRevisits:
    if len(data) != _HOST.size:
        raise StateCodecError(f"a host's revisits are {_HOST.size} bytes, got {len(data)}")
    version, weight, delay = _HOST.unpack(data)
    if version != _VERSION:
        raise StateCodecError(f"host revisits version {version} is not {_VERSION}")
    return HostRevisits(weight, delay)


def host_revisits_key(group: str) -> str:
    """The `REVISITS_FAMILY` key of a host's state (`group` a `state.hosts.group_key`)."""
    return HOST_PREFIX + group


def with_page(record: PageSchedule, answered_ms: int) -> PageSchedule:
    """`record` with a later revisit answered (an answer that is no download)."""
    return replace(record, answered_ms=answered_ms)
