"""When a live crawl asks for a page again: the `--revisit` policy, what is kept per page and
per host to schedule revisits, and the pure rules every engine applies.

After each successful download of a page — its first fetch or a revisit — the job emits the
page's URL again with `not_before` set to its next visit:

- `fixed:INTERVAL`: the download's `fetched_at` + INTERVAL;
- `learned[:EVERY]`: for discovery, from the page's record (`state.revisits.PageRevisits`:
  visits, those that saw another version, the links new to the page they showed). A page's
  yield is its links new to it per ms watched (`new_link_rate`: a hub is worth revisiting
  for the links it shows that it did not show before; the outlinks of the version last seen
  are kept as hashes to count them). A page that says when it was published (a story,
  `published_at`) is asked for no more: what it links to is older than it. Of the host's
  budget b, a share s (`probe_share`) goes to probes and the rest to revisits. A page with
  a yield y > 0 (after `min_revisits` revisits) gets f = (1 − s)·b·y^a / Σ y^a of it (a =
  `concentration`; a = 1/2 is the square-root rule of
  `state.revisit_budget.square_root_frequencies`, which spread the revisits over pages
  that show few new links on the news site), due `due_ms(last visit, f)`, never later
  than `probe_max_ms` after it. A page without one is probed, no sooner than it has gone
  unchanged (`probe_wait_ms`), by its probe weight p = 1 + the links new to it its last
  visit showed (at a first download, all of them): of the probes' share it gets
  (p / Σp)^k (k = `probe_concentration`), so the page that shows far more new links than
  the rest (a home page among section pages) gets nearly all of it, and pages alike leave
  most of it unspent. Probes only of pages that stand out, so that the old links that
  pages alike bring do not take the downloads of the pages that show new ones. While no
  page of the host has an estimate, nothing else would use the budget, and the probes'
  share is all of it.

The budget is kept per host, not for the whole crawl, so that it streams. A crawl-wide
budget B shared by all pages, f_i = B·w_i / Σ_j w_j, needs at every visit the sum over
every page of the crawl: one global quantity that each visit changes and each schedule
reads, which on a distributed runner is either one key holding the whole crawl or a side
input recomputed behind the stream. Per host, the sum is the host's own: the host is a
key the job keeps already (its politeness and pauses), and what a host can be asked is
bounded by its politeness anyway. So the budget is one revisit per EVERY per host (at most
one per the host's reported crawl delay). The host keeps the sums of its pages' weights
(revisits and probes) as running totals, changed by a page's own visits (a page's weight
changes only there), and each page's next visit is worked out at its visit from the
totals as they stand then: a streaming form of the rule, exact for a host whose other
pages' weights did not move since.

A revisit is answered once: each revisit entry carries its due time in its echo
(`schemas.records.REVISIT_ECHO`), and the page's record keeps the due of the last revisit
answered, so a fetch answering it again (a fetcher restarted between its download and the
job's word) is a repeat.
"""

from __future__ import annotations

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
    content_fingerprint,
    decode_page_revisits,
    encode_page_revisits,
    first_visit,
    link_hashes,
    links_new_to,
    new_link_rate,
    outlink_fingerprint,
    probe_wait_ms,
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
    half_life_ms=None, min_revisits=1, probe_ms=HOUR_MS, probe_max_ms=7 * DAY_MS
)
"""The page record's settings a live crawl uses (stated here, so that the offline
evaluation's tuning of its defaults does not move a running crawl's schedule): every visit
at full weight, estimates after one revisit, probes between an hour and a week apart."""
PROBE_SHARE: Final = 0.015
"""learned: the share of a host's budget its probes get once one of its pages has an
estimate (before, all of it)."""
CONCENTRATION: Final = 2.0
"""learned: a page's share of its host's revisits is in proportion to its rate of new
links to this power."""
PROBE_CONCENTRATION: Final = 3.0
"""learned: a page's share of its host's probes is its fraction of the host's probe
weight to this power. All three chosen on the news site's tuning windows
(`docs/results/revisits.md`)."""


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
    probe_share: float = PROBE_SHARE
    """learned: the share of the budget that goes to probes of pages without an estimate."""
    concentration: float = CONCENTRATION
    """learned: the power of a page's rate of new links its share is in proportion to."""
    probe_concentration: float = PROBE_CONCENTRATION
    """learned: the power of a page's fraction of its host's probe weight that gives its
    share of the probes."""

    def __post_init__(self) -> None:
        if self.mode is RevisitMode.FIXED and self.interval_ms < 1:
            raise ValueError(f"a fixed revisit interval must be >= 1 ms, got {self.interval_ms}")
        if self.every_ms < 1:
            raise ValueError(f"the revisit budget must be one per >= 1 ms, got {self.every_ms}")
        if not 0.0 < self.probe_share < 1.0:
            raise ValueError(f"probe_share must be in (0, 1), got {self.probe_share}")
        if not 0.0 < self.concentration <= 8.0:
            raise ValueError(f"concentration must be in (0, 8], got {self.concentration}")
        if not 1.0 <= self.probe_concentration <= 8.0:
            raise ValueError(
                f"probe_concentration must be in [1, 8], got {self.probe_concentration}"
            )


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
    """learned: y^a, y its new links per ms (`new_link_rate`) and a the policy's
    `concentration`: what the page counts in its host's total of revisits (0 without an
    estimate)."""
    probe_weight: float = 0.0
    """learned: what the page counts in its host's total of probes while it has no
    estimate: 1 + the links new to it that its last visit showed (0 with an estimate, and
    for a story)."""
    links: tuple[int, ...] = ()
    """learned: the outlinks of the version last seen (`link_hashes`; none kept for a
    story)."""


@dataclass(frozen=True, slots=True)
class HostRevisits:
    """What the job keeps per host (queue group) to share its budget of revisits."""

    weight: float = 0.0
    """Σ y^a over the host's pages with an estimate (`PageSchedule.weight`)."""
    delay_ms: int = 0
    """The host's crawl delay as its fetcher last reported it (0: none)."""
    probe_weight: float = 0.0
    """Σ of the host's pages' `PageSchedule.probe_weight`."""


SHARE: Final = -1
"""`Visit.due_alone_ms` of a page that takes its share of the host's revisits."""
PROBE: Final = -2
"""… of a page that takes its share of the host's probes."""
NEVER: Final = -3
"""… of a page the rule asks for no more (a story)."""


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
    """The due time that needs no share of the host's budget (fixed); else `SHARE`,
    `PROBE` or `NEVER`."""
    delay_ms: int
    """The crawl delay the answer reported; −1 when it said none."""
    probe_delta: float
    """The page's change of probe weight at this answer."""
    probe_weight: float
    earliest_ms: int
    """A probe's earliest due time (`probe_wait_ms` after the visit)."""


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
    page, links = before.page, before.links
    weight, probe, due_alone, earliest = before.weight, before.probe_weight, SHARE, 0
    if policy.mode is RevisitMode.FIXED:
        due_alone = at + policy.interval_ms
    elif success:
        version, shown = version_of(event), link_hashes(event.outlinks)
        new = links_new_to(links, shown)
        if page is None:
            page = first_visit(at, version, new)
        else:  # a download timed before the last visit (clocks of two fetchers) counts at it
            page = record_visit(page, max(at, page.last_visit_ms), version, new, policy.settings)
        weight, probe, links = 0.0, 0.0, shown
        rate = new_link_rate(page, policy.settings)
        if event.published_at is not None:  # a story: what it links to is older than it
            due_alone, links = NEVER, ()
        elif rate is not None and rate > 0:
            weight = rate**policy.concentration
        else:
            due_alone, probe = PROBE, 1.0 + new
            earliest = page.last_visit_ms + probe_wait_ms(page, policy.settings)
    after = PageSchedule(answered, page, weight, probe, links)
    delay = -1 if event.crawl_delay_ms is None else event.crawl_delay_ms
    last = at if page is None else page.last_visit_ms
    visit = Visit(
        event.url, event.host, event.crawl_id, event.cycle, at, event.echo, success,
        weight - before.weight, weight, last, due_alone, delay,
        probe - before.probe_weight, probe, earliest,
    )  # fmt: skip
    return after, visit


def host_due(
    host: HostRevisits | None, visit: Visit, policy: RevisitPolicy
) -> tuple[int | None, HostRevisits]:
    """When the visited page is next due (None: not again, the answer was no download or
    the page is a story) and the host's state after the visit: its totals moved by the
    page's changes. Of the host's budget b (one per `every_ms`, at most one per crawl
    delay), the share s = `probe_share` goes to probes and the rest to revisits: a page
    with an estimate gets f = (1 − s)·b·w / Σw, one without f = s·b·(p / Σp)^k (p its
    probe weight, k = `probe_concentration`; s = 1 while no page of the host has an
    estimate), due `due_ms(last visit, f)` (a probe not before `probe_wait_ms`; a revisit
    at most `probe_max_ms` after the visit). With probes in proportion (k = 1), the whole
    budget went to first probes of section pages on the news site, and the old stories
    they show took the downloads; with k = 3 it goes to the home page that stands out."""
    before = host if host is not None else HostRevisits()
    delay = before.delay_ms if visit.delay_ms < 0 else visit.delay_ms
    after = HostRevisits(
        max(0.0, before.weight + visit.delta),
        delay,
        max(0.0, before.probe_weight + visit.probe_delta),
    )
    if not visit.success or visit.due_alone_ms == NEVER:
        return None, after
    if visit.due_alone_ms >= 0:
        return visit.due_alone_ms, after
    budget = 1.0 / max(policy.every_ms, delay)
    if visit.due_alone_ms == PROBE:
        probe = visit.probe_weight
        share = policy.probe_share if after.weight > 0 else 1.0
        share *= (probe / max(after.probe_weight, probe)) ** policy.probe_concentration
        return max(due_ms(visit.last_visit_ms, budget * share) or 0, visit.earliest_ms), after
    share = (1.0 - policy.probe_share) * visit.weight / max(after.weight, visit.weight)
    due = due_ms(visit.last_visit_ms, budget * share)
    latest = visit.last_visit_ms + policy.settings.probe_max_ms
    return latest if due is None else min(due, latest), after


# --------------------------------------------------------------------------- encodings

_VERSION = 2
_PAGE = struct.Struct(">BqddBI")
"""version, answered, weight, probe weight, whether a `PageRevisits` (73 bytes) follows,
the number of link hashes (4 bytes each) that come before it."""
_PAGE_V1 = struct.Struct(">BqdB")
"""version 1: answered, weight, whether a `PageRevisits` follows (no probe weight, no
links: read as 0 and none)."""
_HOST = struct.Struct(">Bdqd")
"""version, total weight, crawl delay, total probe weight."""
_HOST_V1 = struct.Struct(">Bdq")


def encode_page_schedule(record: PageSchedule) -> bytes:
    """The layout above; `StateCodecError` for values out of it."""
    n = len(record.links)
    try:
        head = _PAGE.pack(
            _VERSION, record.answered_ms, record.weight, record.probe_weight,
            record.page is not None, n,
        )  # fmt: skip
        links = struct.pack(f">{n}I", *record.links)
    except struct.error as exc:
        raise StateCodecError(f"cannot encode {record!r}: {exc}") from exc
    tail = b"" if record.page is None else encode_page_revisits(record.page)
    return head + links + tail


def decode_page_schedule(data: bytes) -> PageSchedule:
    """`encode_page_schedule` back (version 1 too); `StateCodecError` for anything else."""
    if data[:1] == b"\x01" and len(data) >= _PAGE_V1.size:
        _, answered, weight, has_page = _PAGE_V1.unpack_from(data)
        probe, n, start = 0.0, 0, _PAGE_V1.size
    elif len(data) >= _PAGE.size:
        version, answered, weight, probe, has_page, n = _PAGE.unpack_from(data)
        if version != _VERSION:
            raise StateCodecError(f"page schedule version {version} is not {_VERSION}")
        start = _PAGE.size + 4 * n
    else:
        raise StateCodecError(f"a page schedule is at least {_PAGE_V1.size} bytes, got {len(data)}")
    if len(data) < start:
        raise StateCodecError(f"a page schedule of {n} links is cut short")
    links = struct.unpack_from(f">{n}I", data, start - 4 * n)
    rest = data[start:]
    if bool(has_page) != bool(rest) or has_page > 1:
        raise StateCodecError("a page schedule's record flag does not match its length")
    page = decode_page_revisits(rest) if has_page else None
    return PageSchedule(answered, page, weight, probe, links)


def encode_host_revisits(host: HostRevisits) -> bytes:
    try:
        return _HOST.pack(_VERSION, host.weight, host.delay_ms, host.probe_weight)
    except struct.error as exc:
        raise StateCodecError(f"cannot encode {host!r}: {exc}") from exc


def decode_host_revisits(data: bytes) -> HostRevisits:
    if data[:1] == b"\x01" and len(data) == _HOST_V1.size:
        _, weight, delay = _HOST_V1.unpack(data)
        return HostRevisits(weight, delay)
    if len(data) != _HOST.size:
        raise StateCodecError(f"a host's revisits are {_HOST.size} bytes, got {len(data)}")
    version, weight, delay, probe = _HOST.unpack(data)
    if version != _VERSION:
        raise StateCodecError(f"host revisits version {version} is not {_VERSION}")
    return HostRevisits(weight, delay, probe)


def host_revisits_key(group: str) -> str:
    """The `REVISITS_FAMILY` key of a host's state (`group` a `state.hosts.group_key`)."""
    return HOST_PREFIX + group


def with_page(record: PageSchedule, answered_ms: int) -> PageSchedule:
    """`record` with a later revisit answered (an answer that is no download)."""
    return replace(record, answered_ms=answered_ms)
