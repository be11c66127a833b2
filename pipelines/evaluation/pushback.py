"""How a real crawl treated hosts that pushed back, and where its budget went: read from
its FetchEvents and the web server's access log, for `frontierflow crawl-report`.

A pause is *announced* when a 429 or 503 answer carried `Retry-After` (the FetchEvent's
`retry_after_ms`, from its `fetched_at` on); a request to that host that started inside
the window, after the answer, is a politeness failure. The host rule
(`state.hosts.answer_updates`) is folded over the events in time order, as the job folds
it, to count the pauses it began (back-offs without `Retry-After` included).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from frontierflow.pipelines.evaluation.realcrawl import AccessLine
from frontierflow.schemas.records import ALREADY_FETCHED, FetchEvent
from frontierflow.state.hosts import (
    DEFAULT_POLICY,
    PAUSE_STATUSES,
    HostPolicy,
    HostState,
    answer_updates,
    group_key,
)


@dataclass(frozen=True, slots=True)
class HostBudget:
    """One host's part of a crawl."""

    host: str
    downloads: int
    """FetchEvents with a request behind them (not 208)."""
    share: float
    """Of all downloads of the crawl."""
    pushed_back: int
    """Answers 429 or 503."""
    pauses: int
    """Pauses the host rule began (announced or backed off)."""
    inside_pause: int
    """Requests (from the access log) that started inside a pause the host announced."""


def announced_pauses(events: Iterable[FetchEvent]) -> dict[str, list[tuple[float, float]]]:
    """Host → (start, end) seconds of every pause its `Retry-After` announced."""
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e.status in PAUSE_STATUSES and e.retry_after_ms is not None:
            out[e.host].append((e.fetched_at / 1000, (e.fetched_at + e.retry_after_ms) / 1000))
    return dict(out)


def requests_inside_pauses(
    lines: Sequence[AccessLine], pauses: dict[str, list[tuple[float, float]]]
) -> list[AccessLine]:
    """The requests that started strictly inside a pause announced earlier to their host."""
    return [
        line
        for line in lines
        if any(start < line.start < end for start, end in pauses.get(line.host, ()))
    ]


def host_budgets(
    events: Sequence[FetchEvent],
    lines: Sequence[AccessLine],
    policy: HostPolicy = DEFAULT_POLICY,
) -> list[HostBudget]:
    """Per host, busiest first (see `HostBudget`)."""
    downloads = Counter(e.host for e in events if e.status != ALREADY_FETCHED)
    pushed = Counter(e.host for e in events if e.status in PAUSE_STATUSES)
    inside = Counter(line.host for line in requests_inside_pauses(lines, announced_pauses(events)))
    states: dict[str, HostState] = {}
    for event in sorted(events, key=lambda e: e.fetched_at):
        states.update(answer_updates(states.get, event, policy))
    pauses: Counter[str] = Counter()
    for e in {(e.crawl_id, e.host) for e in events}:
        state = states.get(group_key(*e))
        if state is not None:
            pauses[e[1]] += state.pauses
    total = sum(downloads.values()) or 1
    hosts = sorted(set(downloads) | set(inside), key=lambda h: (-downloads[h], h))
    return [
        HostBudget(h, downloads[h], downloads[h] / total, pushed[h], pauses[h], inside[h])
        for h in hosts
    ]
