"""Scheduled revisits in the step core, one rule for every engine: what a page answer is
(first fetch, revisit or repeat) and does to the page's revisit record, the entry that asks
for the page again, and which change of a URL stands when its strategy changed it too.

The policy and the records are `state.revisit_schedule`; the embedded engine applies these
functions event by event (`pipelines.embedded.revisits`), the bounded Beam replay per URL
and per host in input order (`pipelines.beam.revisits`), so both emit the same schedule.
"""

from __future__ import annotations

from frontierflow.pipelines.core.step import FetchKind, fetch_kind
from frontierflow.schemas.records import (
    REPLY_ECHO,
    REVISIT_ECHO,
    FetchEvent,
    FrontierChange,
    FrontierEntry,
    revisit_due,
)
from frontierflow.state.revisit_schedule import PageSchedule, RevisitPolicy, Visit, visit_page

REVISIT_FLOOR = 2.0**52
"""Revisit entries' priorities lie below −REVISIT_FLOOR, under every strategy's (IECA's −d,
a breadth-first −depth, LAFC's push times in epoch ms, scores and draws): a due revisit
goes after every page the strategy ranks, in the slots new pages leave, as the revisit
policies are compared (`frontierflow simulate revisits`)."""


def revisit_priority(due_ms: int) -> float:
    """Below every strategy's priority, the earliest due first (exact in a double while
    `due_ms` < 2^52 ms, past the year 140,000)."""
    return -(REVISIT_FLOOR + due_ms)


def page_fetch(
    record: PageSchedule | None, last_cycle: int | None, event: FetchEvent, policy: RevisitPolicy
) -> tuple[FetchKind, PageSchedule | None, Visit | None]:
    """A page answer under a revisit policy: its kind (`fetch_kind`), the page's record
    after it, and the visit its host schedules (None for a repeat, which changes nothing)."""
    due = revisit_due(event.echo)
    answered = None if record is None else record.answered_ms
    kind = fetch_kind(last_cycle, event.cycle, due, answered)
    if kind is FetchKind.REPEAT:
        return kind, record, None
    after, visit = visit_page(record, event, due if kind is FetchKind.REVISIT else None, policy)
    return kind, after, visit


def revisit_entry(visit: Visit, due_ms: int, strategy: str) -> FrontierEntry:
    """The entry that asks for the visited page again from `due_ms`: the echo its answer
    carried (the strategy's, so the revisit is routed as the page was) with the due time
    under `REVISIT_ECHO`, no `via` and no reply request (a revisit is nobody's choice)."""
    echo = {k: v for k, v in visit.echo.items() if k not in (REPLY_ECHO, REVISIT_ECHO)}
    echo[REVISIT_ECHO] = str(due_ms)
    return FrontierEntry(
        url=visit.url,
        host=visit.host,
        priority=revisit_priority(due_ms),
        strategy=strategy,
        crawl_id=visit.crawl_id,
        cycle=visit.cycle,
        via=None,
        emitted_at=visit.at_ms,
        echo=echo,
        not_before=due_ms,
    )


def with_revisit(change: FrontierChange | None, revisit: FrontierEntry) -> FrontierChange:
    """The change that stands for a URL whose latest answer scheduled `revisit` while its
    strategy changed it too: the revisit, unless the strategy's change is an entry of a later
    cycle (a new crawl cycle asks for the page anyway). The strategies here emit nothing
    else for a page fetched in its cycle but its removal when fetched, which the revisit
    replaces; the rule does not depend on the order of the two, so a step and a bounded
    replay that sees each URL once agree."""
    if isinstance(change, FrontierEntry) and change.cycle > revisit.cycle:
        return change
    return revisit
