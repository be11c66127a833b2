"""Scrapy's scheduler on frontierflow's frontier: `SCHEDULER =
"frontierflow.connectors.scrapy.scheduler.FrontierScheduler"`.

Requests come from the frontier topic only (see `link.py` for the order and the rules).
What the spider yields itself — its start requests and the links it follows — is dropped
(`enqueue_request` returns False, so Scrapy fires `request_dropped`, and the count is in the
stats as `frontierflow/spider_requests_dropped`): a page's outlinks already travel in its
FetchEvent, and the frontier decides what is fetched next. The one exception is a retry of
a request still waiting for its answer (Scrapy's RetryMiddleware), which is the same entry
and is served before anything new. Seed a crawl with `frontierflow seed`.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from scrapy import Request
from scrapy.core.scheduler import BaseScheduler

from frontierflow.connectors.scrapy.link import FrontierLink, link_for

log = logging.getLogger(__name__)


class FrontierScheduler(BaseScheduler):
    def __init__(self, link: FrontierLink) -> None:
        self.link = link
        self.retries: deque[Request] = deque()
        self._dropped_logged = False

    @classmethod
    def from_crawler(cls, crawler: Any) -> FrontierScheduler:
        return cls(link_for(crawler))

    def open(self, spider: Any) -> None:
        self.link.open()
        log.info(
            "serving the frontier topic %r to Scrapy as fetcher %r (group %r)",
            self.link.settings.kafka.topics.frontier,
            self.link.settings.fetcher_id,
            self.link.settings.kafka.group_id,
        )

    def close(self, reason: str) -> None:
        self.link.close()
        if self.link.reader_error is not None:
            log.error("the frontier reader had failed: %s", self.link.reader_error)

    def has_pending_requests(self) -> bool:
        """True while the crawl goes on: Scrapy closes the spider once this is False and
        nothing is in flight (see `FrontierLink.finished`)."""
        return bool(self.retries) or not self.link.finished()

    def enqueue_request(self, request: Request) -> bool:
        if self.link.owns(request):
            self.retries.append(request)
            return True
        self.link._stat_inc("spider_requests_dropped")
        if not self._dropped_logged:
            self._dropped_logged = True
            log.info(
                "requests the spider yields are dropped (first: %s): the frontier decides "
                "what is fetched, from the outlinks in each FetchEvent",
                request.url,
            )
        return False

    def next_request(self) -> Request | None:
        """A retry first, unless its host is paused (it waits, and the host's other entries
        with it), then the best entry of the frontier."""
        now = self.link.clock()
        for _ in range(len(self.retries)):
            request = self.retries.popleft()
            if not self.link.owns(request):
                continue
            if self.link.may_fetch(request.url, now):
                return request
            self.retries.append(request)
        return self.link.next_request()
