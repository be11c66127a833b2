"""The live job's learned revisit rule (`--revisit learned:EVERY`) in the simulated news crawl:
each download becomes the FetchEvent a fetcher would send — answering the page's revisit
entry when it has one — and goes through the step core's rule (`pipelines.core.revisit
.page_fetch`, `state.revisit_schedule.host_due`) as the embedded engine applies it
(`pipelines.embedded.revisits.StepRevisits`), so the simulation measures the very schedule a
job would emit, and a test holds the two equal on the same events.

The budget is one revisit per download per host (`every_ms` = the crawl's `download_ms`),
the page records' settings and the probes' share the job's
(`state.revisit_schedule.LIVE_SETTINGS`, `PROBE_SHARE`, `CONCENTRATION`,
`PROBE_CONCENTRATION`). A story's event
carries its publication time, as the news-site fetcher sends it.
"""

from __future__ import annotations

from collections.abc import Sequence

from frontierflow.pipelines.core.revisit import page_fetch
from frontierflow.schemas.records import REVISIT_ECHO, FetchEvent
from frontierflow.state.hosts import group_key
from frontierflow.state.revisit_schedule import (
    HostRevisits,
    PageSchedule,
    RevisitMode,
    RevisitPolicy,
    host_due,
)
from frontierflow.state.urls import host_of

FETCHER = "news-site"


def live_policy(download_ms: int) -> RevisitPolicy:
    """`--revisit learned:EVERY` with EVERY the crawl's time per download."""
    return RevisitPolicy(RevisitMode.LEARNED, every_ms=download_ms)


class LiveRevisitRule:
    """Per page its `PageSchedule`, per host its `HostRevisits`, and per page the due time of
    the revisit entry the job last emitted for it (what its next download answers)."""

    def __init__(self, policy: RevisitPolicy, crawl_id: str = "news") -> None:
        if policy.mode is not RevisitMode.LEARNED:
            raise ValueError("the live rule in the simulation is the learned one")
        self.policy = policy
        self.crawl_id = crawl_id
        self.pages: dict[str, PageSchedule] = {}
        self.hosts: dict[str, HostRevisits] = {}
        self.due: dict[str, int] = {}
        """URL → the `not_before` of its latest revisit entry (absent: none)."""
        self.events: list[FetchEvent] = []
        """Every FetchEvent made, in order (what a test replays through the engine)."""

    def download(
        self, url: str, links: Sequence[str], at_ms: int, published_ms: int | None = None
    ) -> int | None:
        """A successful download of `url` at `at_ms` showing `links` (a story published at
        `published_ms`): the page's next due time; None when the rule asks for it no more (a
        story, or the download answered no entry it had not answered, a repeat to the
        job)."""
        echo = {REVISIT_ECHO: str(self.due[url])} if url in self.due else {}
        event = FetchEvent(
            url=url,
            fetched_at=at_ms,
            status=200,
            fetcher_id=FETCHER,
            host=host_of(url),
            crawl_id=self.crawl_id,
            outlinks=tuple(links),
            published_at=published_ms,
            echo=echo,
        )
        self.events.append(event)
        last_cycle = 0 if url in self.pages else None
        _, page, visit = page_fetch(self.pages.get(url), last_cycle, event, self.policy)
        if visit is None or page is None:  # a repeat changes nothing; its entry was taken
            self.due.pop(url, None)
            return None
        self.pages[url] = page
        key = group_key(visit.crawl_id, visit.host)
        due, self.hosts[key] = host_due(self.hosts.get(key), visit, self.policy)
        if due is None:
            self.due.pop(url, None)
        else:
            self.due[url] = due
        return due
