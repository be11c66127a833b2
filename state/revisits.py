"""What a crawl knows of how often each page changes and how much new it finds there.

One `PageRevisits` per URL: its revisits, the revisits that saw a change (the content, or a
hub page's set of outlinks, differs from the version seen before), when a change was last
seen, and what the revisits found (links new to the crawl, and of those the stories the
judge rewarded). From it come a page's change rate (the estimator of Cho & Garcia-Molina
2003, TOIT) and its discovery rate; `state/revisit_budget.py` shares a budget of revisits
among pages by those rates. Pure transitions, the clock passed in, a 73-byte encoding.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass, replace

from frontierflow.state.storage.codec import StateCodecError

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS


@dataclass(frozen=True, slots=True)
class RevisitSettings:
    """How a page's record is kept and when its estimates are trusted (all ours).

    Validated once: a bad setting fails at start-up.
    """

    half_life_ms: int | None = None
    """Counts older by this much weigh half (exponential forgetting, so a rate that drifts
    is followed). None keeps every visit at full weight: Cho & Garcia-Molina's constant
    rate."""
    min_revisits: int = 2
    """Revisits before a page's rates are estimated; until then it is only probed."""
    probe_ms: int = HOUR_MS
    """The shortest wait before probing a page without an estimate (or with a rate of 0)."""
    probe_max_ms: int = 7 * DAY_MS
    """The longest wait between probes."""

    def __post_init__(self) -> None:
        if self.half_life_ms is not None and self.half_life_ms < 1:
            raise ValueError(f"half_life_ms must be >= 1 or None, got {self.half_life_ms}")
        if self.min_revisits < 1:
            raise ValueError(f"min_revisits must be >= 1, got {self.min_revisits}")
        if not 1 <= self.probe_ms <= self.probe_max_ms:
            raise ValueError("probe waits need 1 <= probe_ms <= probe_max_ms")


@dataclass(frozen=True, slots=True)
class PageRevisits:
    """One URL's record. Counts are weighted by age when `half_life_ms` is set, so floats.

    n = `visits`, X = `changes` and T = `observed_ms` are the n, X and n·I of Cho &
    Garcia-Molina 2003 (TOIT), I the mean interval between visits.
    """

    last_visit_ms: int
    last_change_ms: int
    """The last visit that saw a change (the first download counts as one)."""
    fingerprint: int
    """Of the version last seen (`outlink_fingerprint`, `content_fingerprint`)."""
    visits: float = 0.0
    changes: float = 0.0
    observed_ms: float = 0.0
    found: float = 0.0
    """Links new to the crawl that revisits of this page found."""
    relevant: float = 0.0
    """Stories the judge rewarded among the links this page's revisits brought
    (`link_fetched`)."""
    revisits: int = 0
    """Revisits at full weight (for `RevisitSettings.min_revisits`)."""
    waiting: int = 0
    """Links first seen at the last visit that the crawl has not fetched yet."""

    def since_change_ms(self, now_ms: int) -> int:
        """Time since the last change seen."""
        return now_ms - self.last_change_ms


def first_visit(now_ms: int, fingerprint: int, new_links: int = 0) -> PageRevisits:
    """The record of a page downloaded for the first time, showing `new_links` links the
    crawl did not know (they wait, as at a revisit)."""
    return PageRevisits(now_ms, now_ms, fingerprint, waiting=new_links)


def record_visit(
    page: PageRevisits,
    now_ms: int,
    fingerprint: int,
    new_links: int,
    settings: RevisitSettings,
) -> PageRevisits:
    """A revisit at `now_ms` that saw the version `fingerprint` and `new_links` links the
    crawl did not know. Earlier counts are first weighed down by their age."""
    if now_ms < page.last_visit_ms:
        raise ValueError(f"revisit at {now_ms} before the last visit at {page.last_visit_ms}")
    interval = now_ms - page.last_visit_ms
    w = _weight(interval, settings)
    changed = fingerprint != page.fingerprint
    return PageRevisits(
        last_visit_ms=now_ms,
        last_change_ms=now_ms if changed else page.last_change_ms,
        fingerprint=fingerprint,
        visits=page.visits * w + 1.0,
        changes=page.changes * w + (1.0 if changed else 0.0),
        observed_ms=page.observed_ms * w + interval,
        found=page.found * w + new_links,
        relevant=page.relevant * w,
        revisits=page.revisits + 1,
        waiting=new_links,
    )


def link_fetched(page: PageRevisits, rewarded: bool) -> PageRevisits:
    """A revisit of this page brought a link the crawl then fetched; `rewarded` when the
    judge rewarded it (the page is credited with what its revisits led to)."""
    return replace(page, relevant=page.relevant + (1.0 if rewarded else 0.0))


def seen_link_fetched(page: PageRevisits) -> PageRevisits:
    """A link first seen at this page's last visit was fetched (through this page or
    another): it no longer waits."""
    return replace(page, waiting=max(0, page.waiting - 1))


def _weight(age_ms: int, settings: RevisitSettings) -> float:
    if settings.half_life_ms is None:
        return 1.0
    return 0.5 ** (age_ms / settings.half_life_ms)


def change_rate(page: PageRevisits, settings: RevisitSettings) -> float | None:
    """Changes per millisecond, None before `min_revisits` revisits.

    The bias-reduced estimator of Cho & Garcia-Molina 2003 (TOIT) for a page visited n
    times at a regular interval I with X visits that saw a change:
    r̂ = −log((n − X + 0.5)/(n + 0.5)), λ̂ = r̂ / I. Our visits are not regular: I is their
    mean interval T / n (exact when they are regular; the paper's estimator for irregular
    visits needs every interval, which a fixed-size record cannot keep). With
    `half_life_ms` set, n, X and T are weighted by age (ours: the paper assumes a constant
    rate).
    """
    if page.revisits < settings.min_revisits or page.observed_ms <= 0:
        return None
    n, x = page.visits, min(page.changes, page.visits)
    r = -math.log((n - x + 0.5) / (n + 0.5))
    return r / (page.observed_ms / n)


def discovery_rate(
    page: PageRevisits, settings: RevisitSettings, hit_rate: float = 0.0
) -> float | None:
    """Rewarded stories per millisecond watched: those this page's revisits brought, plus
    what its last visit showed first and nothing has fetched since, at `hit_rate` each
    (the crawl's share of rewarded stories among the new links it fetched) and as if every
    visit showed as many (waiting · n / T). So a page only probed so far is valued by what
    it alone shows. None before `min_revisits` revisits. Ours."""
    if page.revisits < settings.min_revisits or page.observed_ms <= 0:
        return None
    return (page.relevant + hit_rate * page.waiting * page.visits) / page.observed_ms


def new_link_rate(page: PageRevisits, settings: RevisitSettings) -> float | None:
    """Links new to the page per millisecond watched: what its revisits showed that its
    version before did not (`found`), over the time between them (`observed_ms`). The yield
    of a hub for discovery when no judge says which links were worth it (ours). None before
    `min_revisits` revisits."""
    if page.revisits < settings.min_revisits or page.observed_ms <= 0:
        return None
    return page.found / page.observed_ms


def probe_wait_ms(page: PageRevisits, settings: RevisitSettings) -> int:
    """How long a page without a usable estimate (or given no revisits) waits after its
    last visit before its next probe: as long as it had gone unchanged when last seen,
    within [`probe_ms`, `probe_max_ms`] — an unchanged page is probed at doubling
    intervals, a page that just changed soon."""
    wait = page.last_visit_ms - page.last_change_ms
    return min(settings.probe_max_ms, max(settings.probe_ms, wait))


def probe_value(page: PageRevisits) -> float:
    """Links new to the crawl a probe of the page may show: (found + 1) / (visits + 1), the
    mean of its revisits with one more that found one (ours: Laplace's rule of succession
    for counts, so a page never revisited ranks 1, one whose revisits show new links every
    time ranks by how many, one that shows none falls toward 0)."""
    return (page.found + 1.0) / (page.visits + 1.0)


def probe_due_ms(page: PageRevisits, settings: RevisitSettings) -> int:
    """When a page's next probe is due (`probe_wait_ms` after its last visit)."""
    return page.last_visit_ms + probe_wait_ms(page, settings)


# --------------------------------------------------------------------------- versions


def _fingerprint(data: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def outlink_fingerprint(links: Iterable[str]) -> int:
    """A hub page's version: its set of outlinks (order and repeats do not count)."""
    return _fingerprint("\n".join(sorted(set(links))).encode())


def content_fingerprint(content: bytes) -> int:
    """Any other page's version: its content."""
    return _fingerprint(content)


def link_hashes(links: Iterable[str]) -> tuple[int, ...]:
    """A version's outlinks as sorted 32-bit hashes, each once: enough to tell which links
    of the next version are new to the page (a clash of two links in 2^32 is ignored)."""
    return tuple(sorted({_fingerprint(u.encode()) >> 32 for u in links}))


def links_new_to(before: tuple[int, ...], after: tuple[int, ...]) -> int:
    """How many of `after`'s links (`link_hashes`) `before` did not show."""
    seen = set(before)
    return sum(h not in seen for h in after)


# --------------------------------------------------------------------------- encoding

_VERSION = 1
_LAYOUT = struct.Struct(">BqqQdddddII")
"""version, last visit, last change, fingerprint, visits, changes, observed, found,
relevant, revisits, waiting: 73 bytes, big-endian."""


def encode_page_revisits(page: PageRevisits) -> bytes:
    """The fixed layout above; `StateCodecError` for values out of it."""
    try:
        return _LAYOUT.pack(
            _VERSION,
            page.last_visit_ms,
            page.last_change_ms,
            page.fingerprint,
            page.visits,
            page.changes,
            page.observed_ms,
            page.found,
            page.relevant,
            page.revisits,
            page.waiting,
        )
    except struct.error as exc:
        raise StateCodecError(f"cannot encode {page!r}: {exc}") from exc


def decode_page_revisits(data: bytes) -> PageRevisits:
    """`encode_page_revisits` back; `StateCodecError` for anything else."""
    if len(data) != _LAYOUT.size:
        raise StateCodecError(f"a page's revisits are {_LAYOUT.size} bytes, got {len(data)}")
    version, *fields = _LAYOUT.unpack(data)
    if version != _VERSION:
        raise StateCodecError(f"page revisits version {version} is not {_VERSION}")
    return PageRevisits(*fields)
