"""One FetchEvent per frontier entry Scrapy answers: a downloader middleware,
`DOWNLOADER_MIDDLEWARES = {"frontierflow.connectors.scrapy.middleware.FetchEventMiddleware":
10}`.

Give it the smallest order of all (the engine side): Scrapy calls `process_response` and
`process_exception` from the downloader outwards, so at 10 it sees the final answer after
Scrapy's retries (a retried request comes back through the scheduler as the same entry and
is answered once), and it sees RobotsTxtMiddleware's refusal (order 100) as an exception.
The event is the reference fetcher's (`fetcher.events.outcome_event`): the entry's echo and
via, the status (or the fetcher's negative code for DNS, refused connections, time-outs,
robots.txt, size cap), bytes, latency (Scrapy's `download_latency`), and for an HTML body
the outlinks and terms read by `htmlpages.page_links_and_terms`. Requests that did not come from
the frontier (robots.txt, the spider's own) pass untouched.

`PushbackMiddleware` goes just above Scrapy's RetryMiddleware (order 560: it sees an
answer before RetryMiddleware turns a 429 or 503 into a retry): it hands the answer's
host to the frontier's host rule at once, so the scheduler holds that retry, and every
other entry of the host, until the pause the server announced (or the back-off) is over.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.http import Response

from frontierflow.connectors.scrapy.link import META_KEY, FrontierLink, link_for
from frontierflow.connectors.scrapy.responses import exception_outcome, response_outcome
from frontierflow.state.hosts import PAUSE_STATUSES


class PushbackMiddleware:
    """See the module docstring: `DOWNLOADER_MIDDLEWARES = {"frontierflow.connectors.scrapy.
    middleware.PushbackMiddleware": 560}`."""

    def __init__(self, link: FrontierLink) -> None:
        self.link = link

    @classmethod
    def from_crawler(cls, crawler: Any) -> PushbackMiddleware:
        return cls(link_for(crawler))

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        token = request.meta.get(META_KEY)
        if token is not None and response.status in PAUSE_STATUSES:
            latency = float(request.meta.get("download_latency", 0.0))
            self.link.pushed_back(token, response_outcome(response, latency))
        return response


class FetchEventMiddleware:
    def __init__(self, link: FrontierLink) -> None:
        self.link = link

    @classmethod
    def from_crawler(cls, crawler: Any) -> FetchEventMiddleware:
        return cls(link_for(crawler))

    def process_response(
        self, request: Request, response: Response, spider: Any = None
    ) -> Response:
        token = request.meta.get(META_KEY)
        if token is not None:
            latency = float(request.meta.get("download_latency", 0.0))
            self.link.answer(token, response_outcome(response, latency))
        return response

    def process_exception(self, request: Request, exception: Exception, spider: Any = None) -> None:
        token = request.meta.get(META_KEY)
        if token is not None:
            latency = request.meta.get("download_latency")
            self.link.answer(token, exception_outcome(request.url, exception, latency))
